#!/usr/bin/env bash
# The static release binary (Swift runtime and Foundation linked in) against the
# same source linked to the toolchain's shared Swift libraries, side by side:
#   start-up: `--version` and `pipeline show` (hyperfine, interleaved by running
#             both commands in one hyperfine call, 3 warm-ups, 50 runs each);
#   run:      a full `run` over the fixtures' photos (13 photos, every format,
#             2 workers spawned per run), ROUNDS rounds, the order of the two
#             binaries swapped every round, medians compared.
# Writes Benchmarks/results/static-<time>.json. Usage: static.sh STATIC DYNAMIC
set -euo pipefail
cd "$(dirname "$0")/.."
STATIC=$(realpath "${1:?static binary}") DYNAMIC=$(realpath "${2:?dynamic binary}")
ROUNDS=${ROUNDS:-9}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/thumbpipe-static.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
RESULT=Benchmarks/results/static-$STAMP.json

for cmd in "--version" "pipeline show -q"; do
    hyperfine -N --warmup 3 --runs 50 --export-json "$WORK/h-${cmd%% *}.json" \
        -n static "$STATIC $cmd" -n dynamic "$DYNAMIC $cmd" >/dev/null
done

run_once() {  # binary → seconds
    rm -rf "$WORK/out"
    local start end
    start=$(date +%s.%N)
    "$1" run Tests/Fixtures/photos -o "$WORK/out" -q --jobs 2 --no-html >/dev/null 2>&1 || true
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
}
: >"$WORK/runs.tsv"
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="static dynamic"; else order="dynamic static"; fi
    for which in $order; do
        bin=$STATIC; [ "$which" = dynamic ] && bin=$DYNAMIC
        printf '%s\t%s\t%s\n' "$round" "$which" "$(run_once "$bin")" >>"$WORK/runs.tsv"
    done
done

python3 - "$WORK" "$RESULT" "$STATIC" "$DYNAMIC" <<'PY'
import json, os, statistics, sys
work, result, static, dynamic = sys.argv[1:]
out = {"static": static, "dynamic": dynamic,
       "staticBytes": os.path.getsize(static), "dynamicBytes": os.path.getsize(dynamic), "startup": {}, "run": {}}
for name in ("--version", "pipeline"):
    h = json.load(open(f"{work}/h-{name}.json"))["results"]
    out["startup"][name] = {r["command"]: {"medianMs": r["median"] * 1000, "meanMs": r["mean"] * 1000} for r in h}
rows = [l.split("\t") for l in open(f"{work}/runs.tsv").read().split("\n") if l]
for which in ("static", "dynamic"):
    times = [float(t) for _, w, t in rows if w == which]
    out["run"][which] = {"medianSeconds": statistics.median(times), "rounds": times}
ratios = [float(d) / float(s) for (_, ws, s), (_, wd, d) in
          zip(sorted((r for r in rows if r[1] == "static"), key=lambda r: int(r[0])),
              sorted((r for r in rows if r[1] == "dynamic"), key=lambda r: int(r[0])))]
out["run"]["dynamicOverStaticByRound"] = statistics.median(ratios)
json.dump(out, open(result, "w"), indent=2)
for name, r in out["startup"].items():
    print(f"start-up {name:10} static {r['static']['medianMs']:.1f} ms, dynamic {r['dynamic']['medianMs']:.1f} ms (median of 50)")
print(f"run (13 photos, 2 workers): static {out['run']['static']['medianSeconds']:.3f} s, "
      f"dynamic {out['run']['dynamic']['medianSeconds']:.3f} s; dynamic/static by round {out['run']['dynamicOverStaticByRound']:.3f}")
print(f"binary: static {out['staticBytes'] / 1e6:.1f} MB, dynamic {out['dynamicBytes'] / 1e6:.1f} MB; saved {result}")
PY
