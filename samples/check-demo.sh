#!/usr/bin/env bash
# make demo's verdict: samples/items.jsonl names one photo that does not exist
# (photos/lost-watch.jpg), to show how a failure looks. The demo worked when the
# run exited 1 with exactly that failure and every other item done; anything else
# (another failure, a crash, a missing archive) fails the target.
# Usage: check-demo.sh STATUS OUT
set -euo pipefail
status=$1 out=$2
verdict=$(python3 - "$status" "$out" <<'PY'
import json, sys
status, out = int(sys.argv[1]), sys.argv[2]
try:
    report = json.load(open(out + "/.thumbpipe/report.json"))
except Exception as error:
    print(f"no report: {error}"); sys.exit(1)
failures = [(f.get("source", ""), f.get("message", "")) for f in report.get("failures", [])]
counts = report.get("counts", {})
expected = [("photos/lost-watch.jpg", "file not found")]
if status == 1 and failures == expected \
        and counts.get("succeeded", 0) + counts.get("withoutImage", 0) == counts.get("items", -1) - 1:
    print(f"{counts['items']} items: {counts['succeeded']} done, the 1 missing photo (photos/lost-watch.jpg) failed as the sample intends")
else:
    print(f"unexpected: thumbpipe exited {status}, failures {failures}, counts {counts}"); sys.exit(1)
PY
) || { echo "make demo: FAILED: $verdict" >&2; exit 1; }
echo "make demo: ok: $verdict"
