#!/usr/bin/env bash
# The sandbox's cost, side by side: the same binary running the same job with
# --sandbox auto (Landlock and seccomp entered by every worker) and --sandbox off,
# ROUNDS rounds, the order swapped every round, medians compared. The job: the
# fixtures' photos (13, every format) copied SETS times, so the workers' start-up
# (where the sandbox is entered) and the per-item work both count.
# Writes Benchmarks/results/sandbox-<time>.json. Usage: sandbox.sh THUMBPIPE
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:?thumbpipe binary}")
ROUNDS=${ROUNDS:-9} SETS=${SETS:-4}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/thumbpipe-sandbox.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for k in $(seq 1 "$SETS"); do mkdir -p "$WORK/photos/$k" && cp Tests/Fixtures/photos/* "$WORK/photos/$k/"; done
RESULT=Benchmarks/results/sandbox-$(date -u +%Y-%m-%dT%H%M%SZ).json
: >"$WORK/runs.tsv"
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="auto off"; else order="off auto"; fi
    for mode in $order; do
        rm -rf "$WORK/out"
        start=$(date +%s.%N)
        "$BIN" run "$WORK/photos" -r -o "$WORK/out" -q --jobs 2 --no-html --sandbox "$mode" >/dev/null 2>&1 || true
        end=$(date +%s.%N)
        printf '%s\t%s\t%s\n' "$round" "$mode" "$(echo "$end - $start" | bc -l)" >>"$WORK/runs.tsv"
    done
done
python3 - "$WORK/runs.tsv" "$RESULT" "$("$BIN" --version | tr '\n' ' ')" <<'PY'
import json, statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
by = {m: {int(r): float(t) for r, mm, t in rows if mm == m} for m in ("auto", "off")}
ratios = [by["auto"][r] / by["off"][r] for r in sorted(by["auto"])]
out = {"binary": sys.argv[3], "rounds": len(ratios),
       "medianSeconds": {m: statistics.median(v.values()) for m, v in by.items()},
       "autoOverOffByRound": statistics.median(ratios), "runs": rows}
json.dump(out, open(sys.argv[2], "w"), indent=2)
print(f"sandbox auto {out['medianSeconds']['auto']:.3f} s, off {out['medianSeconds']['off']:.3f} s "
      f"(median of {len(ratios)}); auto/off by round {out['autoOverOffByRound']:.3f}; saved {sys.argv[2]}")
PY
