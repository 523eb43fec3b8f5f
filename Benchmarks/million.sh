#!/usr/bin/env bash
# make bench-million: the nightly path at collection scale. A manifest of
# ITEMS items (default 1,000,000), one in 1,000 with a small photo, run as:
# a first run, an unchanged re-run, a --dry-run, and a run after 10 photos
# changed (checked: exactly 10 decoded, archive byte-identical to a fresh run).
# Prints wall time and peak memory per run; saves JSON in Benchmarks/results/.
# Then the archive writer alone on the same shape (ITEMS items, one in EVERY
# with a 3 KB thumbnail): a first write and a rebuild after 10 items changed,
# which copies the unchanged items' bytes from the first (MB/s of archive).
set -euo pipefail
cd "$(dirname "$0")/.."
ITEMS=${ITEMS:-1000000}
EVERY=${EVERY:-1000}
WORK=${WORK:-Benchmarks/work/million}
case "$WORK" in /*) ;; *) WORK=$(pwd)/$WORK ;; esac
BIN=.build/release/thumbpipe
swift build -c release --static-swift-stdlib --product thumbpipe >/dev/null
swift build -c release --static-swift-stdlib --product archive-benchmark >/dev/null
mkdir -p "$WORK/src" "$WORK/photos" Benchmarks/results

# Small photos (640 px) from the fixtures, made once.
if [ -z "$(ls "$WORK/src" 2>/dev/null)" ]; then
    i=0
    for f in Tests/Fixtures/photos/*.jpg Tests/Fixtures/edge/orientation-*.jpg; do
        vipsthumbnail "$f" -s 640 -o "$WORK/src/s$i.jpg[Q=90]"
        i=$((i + 1))
    done
fi
python3 - "$WORK" "$ITEMS" "$EVERY" <<'PY'
import json, os, shutil, sys
work, items, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src = sorted(os.listdir(os.path.join(work, "src")))
for i in range(items // every):
    shutil.copyfile(os.path.join(work, "src", src[i % len(src)]), os.path.join(work, "photos", f"p{i:05d}.jpg"))
with open(os.path.join(work, "items.jsonl"), "w") as f:
    for i in range(items):
        item = {"itemName": f"Item {i}", "serialNumber": f"SN{i:07d}", "valueInDollars": i % 1000, "itemKey": f"k{i:07d}"}
        if i % every == 0:
            item["image"] = f"photos/p{i // every:05d}.jpg"
        f.write(json.dumps(item) + "\n")
PY

measure() { # name, then the command; prints "seconds peak-KB"
    local name=$1
    shift
    /usr/bin/time -o "$WORK/time.txt" -f "%e %M" "$@" >/dev/null 2>"$WORK/$name.err" || [ $? -eq 1 ]
    cat "$WORK/time.txt"
}
report() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); i=r["incremental"]; print(r["peakRSSBytes"], i["decoded"], i.get("archiveItemsCopied") or 0)' "$WORK/out/.thumbpipe/report.json"; }

rm -rf "$WORK/out" "$WORK/fresh"
read -r first_s first_kb < <(measure first "$BIN" run "$WORK/items.jsonl" -o "$WORK/out" -q --no-html)
read -r first_peak _ _ < <(report)
read -r unchanged_s unchanged_kb < <(measure unchanged "$BIN" run "$WORK/items.jsonl" -o "$WORK/out" -q --no-html)
read -r unchanged_peak unchanged_decoded _ < <(report)
read -r dry_s dry_kb < <(measure dry "$BIN" run "$WORK/items.jsonl" -o "$WORK/out" --dry-run)
for i in 1 2 3 4 5 6 7 8 9 10; do
    cp "$WORK/src/s$((i % 5)).jpg" "$WORK/photos/p$(printf %05d $((i * 37)))".jpg
done
read -r changed_s changed_kb < <(measure changed "$BIN" run "$WORK/items.jsonl" -o "$WORK/out" -q --no-html)
read -r changed_peak changed_decoded changed_copied < <(report)
"$BIN" run "$WORK/items.jsonl" -o "$WORK/fresh" -q --no-html >/dev/null 2>&1 || true
identical=false
cmp -s "$WORK/out/items.archive" "$WORK/fresh/items.archive" && identical=true
# The runs above leave hundreds of MB to write back: let the disk settle first.
sync
rebuild=$(.build/release/archive-benchmark rebuild "$WORK/bench.archive" "$ITEMS" 3000 "$EVERY" 10 2>/dev/null | python3 -c '
import json, sys
rows = {r["direction"]: r for r in map(json.loads, sys.stdin)}
print(json.dumps({"write": rows["write"], "writeBeforeFsync": rows["write-before-fsync"], "rebuild": rows["rebuild"], "rebuildBeforeFsync": rows["rebuild-before-fsync"], "copiedItems": rows["check"]["copiedItems"], "identicalToFresh": rows["check"]["identicalToFresh"]}))')
rm -f "$WORK/bench.archive"

stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
out="Benchmarks/results/million-$stamp.json"
python3 - "$out" <<PY
import json, os, platform, sys
rows = {
  "first": {"seconds": $first_s, "largestProcessKB": $first_kb, "allProcessesPeakBytes": $first_peak},
  "unchanged": {"seconds": $unchanged_s, "largestProcessKB": $unchanged_kb, "allProcessesPeakBytes": $unchanged_peak, "decoded": $unchanged_decoded},
  "dryRun": {"seconds": $dry_s, "largestProcessKB": $dry_kb},
  "tenChanged": {"seconds": $changed_s, "largestProcessKB": $changed_kb, "allProcessesPeakBytes": $changed_peak, "decoded": $changed_decoded, "archiveItemsCopied": $changed_copied, "archiveIdenticalToFresh": "$identical" == "true"},
}
archive = json.loads('$rebuild')
machine = {"cpus": os.cpu_count(), "machine": platform.machine(), "system": platform.platform()}
json.dump({"benchmark": "million", "items": $ITEMS, "photos": $ITEMS // $EVERY, "machine": machine, "runs": rows, "archiveWriter": archive}, open(sys.argv[1], "w"), indent=2)
print(f"{'run':<12}{'seconds':>9}{'peak MB (largest)':>19}")
for name, r in rows.items():
    print(f"{name:<12}{r['seconds']:>9.1f}{r['largestProcessKB'] / 1024:>19.0f}")
print(f"10 changed: {rows['tenChanged']['decoded']} decoded, {rows['tenChanged']['archiveItemsCopied']} archive items copied; archive identical to a fresh run: {rows['tenChanged']['archiveIdenticalToFresh']}")
w, r = archive["write"], archive["rebuild"]
wb, rb = archive["writeBeforeFsync"], archive["rebuildBeforeFsync"]
print(f"archive writer, {w['bytes'] / 1e6:.0f} MB: first write {w['megabytesPerSecond']} MB/s ({wb['megabytesPerSecond']} before the fsync); rebuild after 10 changed {r['megabytesPerSecond']} MB/s ({rb['megabytesPerSecond']} before the fsync), {archive['copiedItems']} items copied, identical to a fresh write: {archive['identicalToFresh']}")
print(f"saved {sys.argv[1]}")
PY
