#!/usr/bin/env bash
# make fuzz: runs every fuzz target SECONDS seconds under libFuzzer with
# AddressSanitizer, one after the other, each from its corpus in Fuzz/Corpus
# (new inputs it finds go to .build/fuzz-work, not into the repository).
# LeakSanitizer is off: at exit it scans the Swift runtime's reserved address
# space for minutes; leaks are looked for by test-sanitize's suites instead.
# Prints one line a target; exits 1 on any finding, saying where the input is.
# Usage: run.sh FUZZER SECONDS TARGET...
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZER=$(realpath "$1") TIME=$2
shift 2
WORK=.build/fuzz-work
mkdir -p "$WORK" Fuzz/Findings
status=0
for target in "$@"; do
    copy="$WORK/fuzz-$target"
    cp "$FUZZER" "$copy"
    mkdir -p "$WORK/corpus-$target"
    log="$WORK/$target.log"
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 "$copy" -max_total_time="$TIME" -timeout=10 -rss_limit_mb=3072 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="Fuzz/Findings/$target-" \
        "$WORK/corpus-$target" "Fuzz/Corpus/$target" >"$log" 2>&1
    code=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    found=$(grep -o "Test unit written to [^ ]*" "$log" | sed 's/Test unit written to //' | tr '\n' ' ')
    if [ "$code" -ne 0 ] || [ -n "$found" ]; then
        echo "fuzz: $target: ${execs:-?} execs, ${cov:-?} cov, FINDING (exit $code): input saved as ${found:-?}; log $log"
        status=1
    else
        echo "fuzz: $target: ${execs:-0} execs, ${cov:-0} cov, 0 crashes"
    fi
done
exit $status
