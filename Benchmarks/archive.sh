#!/usr/bin/env bash
# The archive benchmark: write, then read back, an items.archive of ITEMS
# synthetic items with BYTES-byte thumbnails (default 1,000,000 × 6 KB, about
# 6.5 GB), each direction in its own process. Prints a table and saves JSON to
# Benchmarks/results/archive-<UTC date>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
ITEMS=${ITEMS:-1000000}
BYTES=${BYTES:-6144}
WORK=${WORK:-Benchmarks/work}
mkdir -p "$WORK" Benchmarks/results
swift build -c release --static-swift-stdlib --product archive-benchmark >/dev/null
bin=.build/release/archive-benchmark
archive="$WORK/bench-items.archive"
rm -f "$archive"
sync
write=$("$bin" write "$archive" "$ITEMS" "$BYTES")
sync
# Drop the page cache where allowed, so the read is a read from disk.
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
read=$("$bin" read "$archive")
rm -f "$archive"
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
out="Benchmarks/results/archive-$stamp.json"
python3 - "$out" "$write" "$read" <<'PY'
import json, sys, platform, os
out, w, r = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
machine = {"cpus": os.cpu_count(), "machine": platform.machine(), "system": platform.platform()}
json.dump({"benchmark": "archive", "machine": machine, "write": w, "read": r}, open(out, "w"), indent=2)
print(f"{'direction':<10}{'items':>10}{'GB':>8}{'seconds':>10}{'MB/s':>10}{'peak RSS MB':>13}")
for d in (w, r):
    print(f"{d['direction']:<10}{d['items']:>10}{d['bytes']/1e9:>8.2f}{d['seconds']:>10.2f}{d['megabytesPerSecond']:>10.1f}{d['peakRSSBytes']/1e6:>13.1f}")
print(f"saved {out}")
PY
