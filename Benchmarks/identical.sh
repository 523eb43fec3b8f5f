#!/usr/bin/env bash
# Outputs must not change with a refactoring: runs two thumbpipe builds side by
# side over the same inputs and compares every archive and store file they
# write, byte for byte (reports and the state hold times, and are left out).
#   1. every fixture photo and edge file, as a folder run (-r);
#   2. the samples' manifest;
#   3. a nightly sequence on one shared copy of the photos: a first night, then a
#      touched file, a replaced photo, a deleted one, a moved one, a settings
#      change, each night run by both builds into their own folders;
#   4. two shards of the samples merged.
# Usage: Benchmarks/identical.sh OLD_THUMBPIPE NEW_THUMBPIPE
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=$(realpath "$1") NEW=$(realpath "$2")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/thumbpipe-identical.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
compared=0 differ=0

# Compares the archive and store files of two output folders.
same() {
    local label=$1 a=$2 b=$3
    local list
    list=$(cd "$a" && find . -type f ! -path './.thumbpipe/*' | sort)
    if [ "$list" != "$(cd "$b" && find . -type f ! -path './.thumbpipe/*' | sort)" ]; then
        echo "identical: $label: the two builds wrote different files" >&2
        differ=$((differ + 1))
        return
    fi
    if ! grep -q '^./items.archive$' <<<"$list"; then
        echo "identical: $label: no archive was written" >&2
        differ=$((differ + 1))
    fi
    local n=0
    while read -r f; do
        n=$((n + 1))
        cmp -s "$a/$f" "$b/$f" || { echo "identical: $label: $f differs" >&2; differ=$((differ + 1)); }
    done <<<"$list"
    compared=$((compared + n))
    echo "identical: $label: $n files compared"
}

both() { # label, arguments after the output folder's place
    local label=$1
    shift
    "$OLD" "$@" -o "$WORK/old-$label" -q >/dev/null 2>&1
    "$NEW" "$@" -o "$WORK/new-$label" -q >/dev/null 2>&1
    same "$label" "$WORK/old-$label" "$WORK/new-$label"
}

mkdir -p "$WORK/fixtures"
cp -r Tests/Fixtures/photos Tests/Fixtures/edge "$WORK/fixtures/"
both fixtures run "$WORK/fixtures" -r
both samples run samples/items.jsonl

# The nightly sequence: both builds' folders see the same photos each night.
mkdir -p "$WORK/night/a" "$WORK/night/b"
i=0
for f in Tests/Fixtures/photos/*.jpg; do
    cp "$f" "$WORK/night/$([ $((i % 2)) = 0 ] && echo a || echo b)/"
    i=$((i + 1))
    [ $i -ge 12 ] && break
done
night() {
    "$OLD" run "$WORK/night" -r -o "$WORK/old-night" -q --max-removed 50% "$@" >/dev/null 2>&1
    "$NEW" run "$WORK/night" -r -o "$WORK/new-night" -q --max-removed 50% "$@" >/dev/null 2>&1
    same "night $n" "$WORK/old-night" "$WORK/new-night"
    n=$((n + 1))
}
n=1
night
touch "$WORK/night/a/"*.jpg && night
first=$(ls "$WORK/night/a" | head -1) second=$(ls "$WORK/night/b" | head -1)
cp "$WORK/night/b/$second" "$WORK/night/a/$first" && night
rm "$WORK/night/b/$second" && night
mv "$WORK/night/a/$first" "$WORK/night/b/moved.jpg" && night
night --quality 0.8
night --verify-content --quality 0.8

# Two shards merged.
for k in 0 1; do
    "$OLD" run samples/items.jsonl --shard "$k/2" -o "$WORK/old-part-$k" -q >/dev/null 2>&1
    "$NEW" run samples/items.jsonl --shard "$k/2" -o "$WORK/new-part-$k" -q >/dev/null 2>&1
done
"$OLD" merge "$WORK/old-part-0" "$WORK/old-part-1" -o "$WORK/old-merged" -q >/dev/null 2>&1
"$NEW" merge "$WORK/new-part-0" "$WORK/new-part-1" -o "$WORK/new-merged" -q >/dev/null 2>&1
same merge "$WORK/old-merged" "$WORK/new-merged"

echo "identical: $compared files compared, $differ differ"
[ "$differ" -eq 0 ]
