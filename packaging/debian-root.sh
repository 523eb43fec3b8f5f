#!/usr/bin/env bash
# A clean Debian 12 root from Debian's packages (mmdebstrap --variant=apt:
# essential packages and apt, what debian:bookworm-slim holds), made once and
# cached as CACHE/bookworm-apt.tar. No Swift, no build tools: the machine a
# user installs the .deb on. Usage: packaging/debian-root.sh CACHE
set -euo pipefail
CACHE=${1:?cache folder}
TAR=$CACHE/bookworm-apt.tar
[ -s "$TAR" ] && exit 0
mkdir -p "$CACHE"
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
echo "debian-root: making a clean Debian 12 root with mmdebstrap (once; cached as $TAR)"
mmdebstrap --quiet --variant=apt --format=tar \
    --aptopt='Acquire::Retries "3"' \
    bookworm "$TAR.partial" \
    "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"
mv "$TAR.partial" "$TAR"
