#!/usr/bin/env bash
# The jail's cost, side by side: the same binary running the same job with
# --sandbox required (every worker in its own namespaces and root, no
# capabilities, Landlock, seccomp; sources by descriptor, stores in sealed
# memory files the parent checks and writes) and --sandbox off, ROUNDS rounds,
# the order swapped every round, medians compared, on two sets: the fixtures'
# JPEGs copied SETS times, and their HEIC and AVIF photos copied 3×SETS times.
# Workers start once per run, so their start-up (where the jail is made) and
# the per-item work both count.
# Writes Benchmarks/results/sandbox-<time>.json. Usage: sandbox.sh THUMBPIPE
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:?thumbpipe binary}")
ROUNDS=${ROUNDS:-9} SETS=${SETS:-4}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/thumbpipe-sandbox.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for k in $(seq 1 "$SETS"); do
    mkdir -p "$WORK/jpeg/$k" "$WORK/heic/$k"
    cp Tests/Fixtures/photos/*.jpg "$WORK/jpeg/$k/"
    for copy in 1 2 3; do
        for f in Tests/Fixtures/photos/*.HEIC Tests/Fixtures/photos/*.avif; do
            cp "$f" "$WORK/heic/$k/$copy-$(basename "$f")"
        done
    done
done
RESULT=Benchmarks/results/sandbox-$(date -u +%Y-%m-%dT%H%M%SZ).json
: >"$WORK/runs.tsv"
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="required off"; else order="off required"; fi
    for set in jpeg heic; do
        for mode in $order; do
            rm -rf "$WORK/out"
            start=$(date +%s.%N)
            "$BIN" run "$WORK/$set" -r -o "$WORK/out" -q --jobs 2 --no-html --sandbox "$mode" >/dev/null 2>&1 || true
            end=$(date +%s.%N)
            printf '%s\t%s\t%s\t%s\n' "$round" "$set" "$mode" "$(echo "$end - $start" | bc -l)" >>"$WORK/runs.tsv"
        done
    done
done
python3 - "$WORK/runs.tsv" "$RESULT" "$("$BIN" --version | tr '\n' ' ')" <<'PY'
import json, statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
out = {"binary": sys.argv[3], "sets": {}, "runs": rows}
for s in ("jpeg", "heic"):
    by = {m: {int(r): float(t) for r, ss, mm, t in rows if ss == s and mm == m} for m in ("required", "off")}
    ratios = [by["required"][r] / by["off"][r] for r in sorted(by["required"])]
    out["sets"][s] = {"rounds": len(ratios), "medianSeconds": {m: statistics.median(v.values()) for m, v in by.items()},
                      "jailOverOffByRound": statistics.median(ratios)}
    m = out["sets"][s]
    print(f"{s}: jail {m['medianSeconds']['required']:.3f} s, off {m['medianSeconds']['off']:.3f} s "
          f"(median of {len(ratios)}); jail/off by round {m['jailOverOffByRound']:.3f}")
json.dump(out, open(sys.argv[2], "w"), indent=2)
print(f"saved {sys.argv[2]}")
PY
