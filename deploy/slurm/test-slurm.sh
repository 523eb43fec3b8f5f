#!/usr/bin/env bash
# make test-slurm: deploy/slurm/thumbpipe.sbatch, unchanged, on a real single-node
# Slurm (local-cluster.sh), as a 3-task array over a copy of samples/ plus a
# dependent merge job, exactly as deploy/README.md tells users to submit it.
#
#   1. the merged output is byte-identical to a single-machine run;
#   2. after one sample photo changes, re-submitting redoes only the shard that
#      holds it, and the merged output again equals a fresh single run;
#   3. a job that fails (a manifest that does not exist) is reported with its log
#      tail, not waited on forever.
#
# THUMBPIPE: the executable to put on the jobs' PATH (default .build/debug/thumbpipe).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
THUMBPIPE=${THUMBPIPE:-$ROOT/.build/debug/thumbpipe}
[ -x "$THUMBPIPE" ] || { echo "test-slurm: $THUMBPIPE is not built" >&2; exit 2; }
BIN=$(mktemp -d "${TMPDIR:-/tmp}/thumbpipe-slurm-bin.XXXXXX")
ln -s "$THUMBPIPE" "$BIN/thumbpipe"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/thumbpipe-slurm-test.XXXXXX")
export SLURM_LOCAL_DIR=$WORK/cluster
CLUSTER=deploy/slurm/local-cluster.sh
SHARDS=3
JOB_TIMEOUT=${JOB_TIMEOUT:-300}

finish() {
    local status=$?
    "$CLUSTER" stop >/dev/null 2>&1 || true
    # The daemons must be gone: their recorded PIDs no longer exist.
    for pid in $(cat "$SLURM_LOCAL_DIR"/*.pid 2>/dev/null); do
        if kill -0 "$pid" 2>/dev/null; then
            echo "test-slurm: daemon $pid still running after stop" >&2
            status=1
        fi
    done
    rm -rf "$BIN"
    [ $status -eq 0 ] && rm -rf "$WORK"
    exit $status
}
trap finish EXIT

fail() {
    echo "test-slurm: FAILED: $*" >&2
    for f in "$WORK"/logs/*.log; do
        [ -f "$f" ] || continue
        echo "---- $f (last 20 lines)" >&2
        tail -n 20 "$f" >&2
    done
    exit 1
}

"$CLUSTER" start
eval "$("$CLUSTER" env)"

# A copy of the samples, so that one photo can change.
cp -r samples "$WORK/samples"
mkdir -p "$WORK/logs"
MANIFEST=$WORK/samples/items.jsonl
OUT=$WORK/sharded

# Submits the array and its merge as deploy/README.md shows; waits for the merge.
# Returns 0 when every task and the merge ended as thumbpipe intends (merge's
# exit 1 means "some items failed", which the samples have on purpose).
submit() {
    local manifest=$1 label=$2 array merge parts=()
    array=$(sbatch --parsable --array=0-$((SHARDS - 1)) --chdir="$WORK" \
        --output="$WORK/logs/$label-%A_%a.log" \
        --export=ALL,PATH="$BIN:$PATH",MANIFEST="$manifest",OUT="$OUT" \
        deploy/slurm/thumbpipe.sbatch)
    LAST_ARRAY=$array
    for k in $(seq 0 $((SHARDS - 1))); do parts+=("$OUT/part-$k"); done
    merge=$(sbatch --parsable --dependency=afterok:"$array" --kill-on-invalid-dep=yes \
        --chdir="$WORK" --output="$WORK/logs/$label-merge-%j.log" --export=ALL,PATH="$BIN:$PATH" \
        --wrap "thumbpipe merge ${parts[*]} -o $OUT/output --run-id $array")
    # Wait for both to leave the queue (polled: sbatch --wait backs off to 32 s).
    local deadline=$((SECONDS + JOB_TIMEOUT))
    while [ -n "$(squeue -h -j "$array,$merge" 2>/dev/null)" ]; do
        if [ $SECONDS -ge $deadline ]; then
            scancel "$array" "$merge" 2>/dev/null || true
            echo "the jobs did not finish in ${JOB_TIMEOUT} s" >&2
            return 1
        fi
        sleep 0.3
    done
    local status
    status=$(scontrol show job "$merge" 2>/dev/null | sed -n 's/.*ExitCode=\([0-9]*\):.*/\1/p' | head -n 1)
    # The array's tasks: every one must have completed.
    local states
    states=$(scontrol show job "$array" 2>/dev/null | grep -o 'JobState=[A-Z_]*' || true)
    if [ -z "$states" ] || grep -qv 'JobState=COMPLETED' <<<"$states"; then
        echo "array $array: $(tr '\n' ' ' <<<"$states")" >&2
        return 1
    fi
    # The merge: 0, or 1 for "some items failed" (the samples have one on purpose).
    [ "$status" = 0 ] || [ "$status" = 1 ] || { echo "merge job $merge exited ${status:-?}" >&2; return 1; }
}

same_output() {
    local a=$1 b=$2
    cmp -s "$a/items.archive" "$b/items.archive" || { echo "items.archive differs" >&2; return 1; }
    local names_a names_b
    names_a=$(cd "$a" && ls)
    names_b=$(cd "$b" && ls)
    [ "$names_a" = "$names_b" ] || { echo "store files differ: $names_a vs $names_b" >&2; return 1; }
    for name in $names_a; do cmp -s "$a/$name" "$b/$name" || { echo "$name differs" >&2; return 1; }; done
}

decoded() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["incremental"]["decoded"])' "$1"; }

# 1. The array and the merge equal one machine's run.
"$THUMBPIPE" run "$MANIFEST" -o "$WORK/single" -q || [ $? -eq 1 ] || fail "single run"
submit "$MANIFEST" first || fail "the first submission"
FIRST_ARRAY=$LAST_ARRAY
same_output "$OUT/output" "$WORK/single" || fail "merged output differs from a single run"
echo "test-slurm: merged output byte-identical to a single run"

# 2. The second night: one photo changes, and the array is submitted again. Only
#    that photo's shard redoes work; the merge takes this submission's parts.
cp "$WORK/samples/photos/Kodak-PIXPRO-SP360.jpg" "$WORK/samples/photos/Canon-EOS-1000D.jpg"
submit "$MANIFEST" second || fail "the second submission"
redone=0
for k in $(seq 0 $((SHARDS - 1))); do
    n=$(decoded "$OUT/part-$k/.thumbpipe/report.json")
    echo "test-slurm: shard $k decoded $n"
    [ "$n" -eq 0 ] || redone=$((redone + 1))
    [ "$n" -le 1 ] || fail "shard $k decoded $n items; one photo changed"
done
[ $redone -eq 1 ] || fail "$redone shards redid work; exactly one should"
"$THUMBPIPE" run "$MANIFEST" -o "$WORK/fresh" -q || [ $? -eq 1 ] || fail "fresh single run"
same_output "$OUT/output" "$WORK/fresh" || fail "merged output differs from a fresh single run"
echo "test-slurm: after one photo changed, one shard redid it; merged output byte-identical to a fresh single run"
# The parts now belong to the second submission: a merge naming the first is refused.
status=0
"$THUMBPIPE" merge "$OUT"/part-{0,1,2} -o "$WORK/stale" --run-id "$FIRST_ARRAY" -q 2>"$WORK/stale.err" || status=$?
[ $status -eq 65 ] && grep -q "not of run '$FIRST_ARRAY'" "$WORK/stale.err" \
    || fail "a merge of the first submission's run over the second's parts exited $status: $(cat "$WORK/stale.err")"
echo "test-slurm: a merge naming the first submission's run is refused (65): $(head -c 160 "$WORK/stale.err")"

# 3. A failing job is reported, not waited on.
OUT=$WORK/failing
if submit "$WORK/no-such-manifest.jsonl" failing; then fail "a job over a missing manifest was taken as done"; fi
grep -qs "cannot open manifest" "$WORK"/logs/failing-*.log || fail "the failing job's log does not say why"
echo "test-slurm: a failing job is reported with its log:"
tail -n 2 "$(ls "$WORK"/logs/failing-*_0.log | head -n 1)" | sed 's/^/  /'
echo "test-slurm: passed"
