#!/usr/bin/env bash
# make test-install: thumbpipe as a user gets it, on machines that have never
# seen Swift.
#   1. The .deb, installed by apt (dependencies from Debian) into a clean Debian 12
#      root (packaging/debian-root.sh), then used there from a folder with no
#      pipelines/: run a folder of photos, inspect the archive, read the man page,
#      complete `thumbpipe r<TAB>` through bash-completion. The installed binary's
#      shared libraries all belong to Debian packages installed in that root.
#   2. The image (make image), running the same job with `buildah run`.
# One line a check. Usage: packaging/test-install.sh VERSION IMAGE CACHE
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:?version} IMAGE=${2:?image} CACHE=${3:?cache folder}
ARCH=$(dpkg --print-architecture)
DEB=.build/thumbpipe_${VERSION}_${ARCH}.deb
read -r -a B <<<"${BUILDAH_FLAGS:---storage-driver vfs}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/thumbpipe-install.XXXXXX")
ROOT=$WORK/root
ctr=""
cleanup() {
    local status=$?
    [ -n "$ctr" ] && buildah "${B[@]}" rm "$ctr" >/dev/null 2>&1
    rm -rf "$WORK"
    exit $status
}
trap cleanup EXIT
fail() { echo "test-install: FAILED: $*" >&2; exit 1; }

# A shell in the root, in its own mount namespace (the mounts go with it).
in_root() {
    unshare --mount --fork /bin/sh -c '
        root=$1; shift
        mount --rbind /dev "$root/dev" && mount -t proc proc "$root/proc" || exit 125
        exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive /bin/bash -c "$@"
    ' sh "$ROOT" "$@"
}

# 0. make install / make uninstall with PREFIX and DESTDIR: every file in place, the
#    installed binary finds its pipelines under PREFIX/share, and uninstall leaves nothing.
DEST=$WORK/dest PREFIX=/opt/thumbpipe
make --no-print-directory -s install-files DESTDIR="$DEST" PREFIX="$PREFIX" >/dev/null
for f in bin/thumbpipe share/thumbpipe/pipelines/homepwner.json share/man/man1/thumbpipe.1 \
    share/bash-completion/completions/thumbpipe share/zsh/site-functions/_thumbpipe \
    share/fish/vendor_completions.d/thumbpipe.fish; do
    [ -f "$DEST$PREFIX/$f" ] || fail "make install did not install $PREFIX/$f"
done
(cd / && env -i HOME="$WORK" "$DEST$PREFIX/bin/thumbpipe" pipeline list) \
    | grep -qx "homepwner	$DEST$PREFIX/share/thumbpipe/pipelines/homepwner.json" \
    || fail "the installed binary does not find PREFIX/share/thumbpipe/pipelines"
make --no-print-directory -s uninstall DESTDIR="$DEST" PREFIX="$PREFIX" >/dev/null
left=$(find "$DEST" -type f)
[ -z "$left" ] || fail "make uninstall left: $left"
echo "test-install: make install / uninstall (PREFIX=$PREFIX, DESTDIR): 6 files in place, pipelines found under PREFIX/share, nothing left: ok"

# 1. The .deb on a clean Debian 12.
packaging/debian-root.sh "$CACHE"
mkdir -p "$ROOT"
tar -xf "$CACHE/bookworm-apt.tar" -C "$ROOT"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
in_root 'command -v swift swiftc' >/dev/null && fail "the clean root has Swift"
[ -z "$(find "$ROOT" -name 'libswiftCore.so*' -print -quit)" ] || fail "the clean root has the Swift runtime"

# Photos, in a folder with no pipelines/ anywhere above it.
PHOTOS="Canon-EOS-1000D.jpg Nikon-D3100.jpg Apple-iPhone-13-Pro-Max.HEIC Nikon-Coolpix-P7000.webp"
mkdir -p "$ROOT/home/user/collection/trip"
for p in $PHOTOS; do cp "Tests/Fixtures/photos/$p" "$ROOT/home/user/collection/trip/"; done
cp "$DEB" "$ROOT/tmp/"
# The contact sheet's fonts are recommended: Latin, and Chinese and Japanese.
dpkg-deb -f "$DEB" Recommends | grep -q 'fonts-noto-cjk | fonts-droid-fallback' \
    || fail "the package does not recommend a font with CJK (Recommends: $(dpkg-deb -f "$DEB" Recommends))"
# apt-get install ./thumbpipe_….deb: apt resolves libvips42 and the rest from Debian.
in_root "apt-get -o DPkg::Lock::Timeout=600 update -qq && cd /tmp && apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    ./$(basename "$DEB") man-db bash-completion" >"$WORK/apt.log" 2>&1 \
    || { tail -n 20 "$WORK/apt.log" >&2; fail "apt-get install ./$(basename "$DEB")"; }

# Its shared libraries: every NEEDED one is a file of an installed Debian package,
# none from a toolchain, and no RUNPATH leads out of the system's folders.
BIN=$ROOT/usr/bin/thumbpipe
needed=$(readelf -d "$BIN" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || fail "readelf found no NEEDED entries"
for lib in $needed; do
    case $lib in libswift* | libFoundation* | lib_Foundation* | libdispatch* | libBlocksRuntime*)
        fail "the binary needs $lib, a Swift toolchain library" ;;
    esac
    in_root "dpkg -S '*/$lib'" >/dev/null 2>&1 || fail "$lib is in no installed Debian package"
done
if readelf -d "$BIN" | grep -E 'R(UN)?PATH' | grep -v '\[\$ORIGIN\]' | grep -q .; then
    fail "the binary has a search path: $(readelf -d "$BIN" | grep -E 'R(UN)?PATH')"
fi
in_root 'ldd /usr/bin/thumbpipe' >"$WORK/ldd" || fail "ldd"
! grep -q 'not found' "$WORK/ldd" || fail "unresolved libraries: $(grep 'not found' "$WORK/ldd")"
echo "test-install: readelf/ldd: $(wc -w <<<"$needed") libraries, every one from an installed Debian package, none from Swift"

# The job, from a folder with no pipelines/.
in_root 'cd /home/user && test ! -e pipelines && thumbpipe --version && thumbpipe run collection -r -o out -q' \
    >"$WORK/run.log" 2>&1 || { cat "$WORK/run.log" >&2; fail "thumbpipe run"; }
grep -q "^revision " "$WORK/run.log" || fail "--version names no revision"
items=$(in_root 'cd /home/user && thumbpipe inspect out/items.archive --json' | grep -c '"itemKey"') || true
[ "$items" = 4 ] || fail "inspect lists $items items, not 4"
stores=$(find "$ROOT/home/user/out" -maxdepth 1 -type f ! -name items.archive | wc -l)
[ "$stores" = 4 ] || fail "$stores store files, not 4"
# The man page, found by man; the completion, loaded by bash-completion on demand.
in_root 'man -w thumbpipe' | grep -q '/usr/share/man/man1/thumbpipe.1.gz' || fail "man -w thumbpipe"
in_root 'MANPAGER=cat MANWIDTH=80 man thumbpipe 2>/dev/null' | grep -q 'merge PART' || fail "man thumbpipe"
completed=$(in_root '. /usr/share/bash-completion/bash_completion
    __load_completion thumbpipe || exit 1
    COMP_WORDS=(thumbpipe r); COMP_CWORD=1; COMP_LINE="thumbpipe r"; COMP_POINT=${#COMP_LINE}
    $(complete -p thumbpipe | sed -n "s/.*-F \([^ ]*\) .*/\1/p") thumbpipe r thumbpipe
    echo "${COMPREPLY[*]}"') || fail "bash completion did not load"
[ "$completed" = "run report" ] || fail "thumbpipe r<TAB> completes to '$completed', not 'run report'"
echo "test-install: .deb installed by apt on a clean Debian 12 (no Swift): run ($items items, $stores store files), inspect, man, completion (r<TAB>: $completed): ok"

# The nightly service: its user, its units (shipped disabled, accepted by
# systemd-analyze verify in the root), and its ExecStart run as that user with the
# unit's environment and its hardening approximated: no new privileges, no
# capabilities, / read-only but for its state folder, a private /tmp. Its
# workers' sandbox must still be whole in there.
in_root 'getent passwd thumbpipe' | awk -F: '$3 > 0 && $3 < 1000 { ok = 1 } END { exit !ok }' \
    || fail "postinst made no system user thumbpipe"
for unit in thumbpipe-nightly@.service thumbpipe-nightly@.timer; do
    [ -f "$ROOT/lib/systemd/system/$unit" ] || fail "the package has no $unit"
done
[ -z "$(find "$ROOT/etc/systemd" -name 'thumbpipe-nightly*' 2>/dev/null)" ] || fail "the timer is enabled on install"
in_root "apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends systemd >/dev/null 2>&1 \
    && systemd-analyze verify thumbpipe-nightly@family.service thumbpipe-nightly@family.timer" >"$WORK/verify.log" 2>&1 \
    || { cat "$WORK/verify.log" >&2; fail "systemd-analyze verify"; }
grep -qv 'man thumbpipe' "$WORK/verify.log" 2>/dev/null && [ -s "$WORK/verify.log" ] \
    && { cat "$WORK/verify.log" >&2; fail "systemd-analyze verify complained"; }
mkdir -p "$ROOT/var/lib/prometheus/node-exporter"
printf 'SOURCE=/home/user/collection\n' >"$ROOT/etc/thumbpipe/family.conf"
in_root 'install -d -o thumbpipe -g thumbpipe /var/lib/thumbpipe /var/lib/thumbpipe/family /var/lib/thumbpipe/metrics'
# ProtectSystem=strict and PrivateTmp=, approximated: the root read-only but for the
# state folder (StateDirectory=), a private /tmp; then User=, NoNewPrivileges= and an
# empty capability set, with the unit's environment.
unshare --mount --fork /bin/sh -c '
    root=$1
    mount --bind "$root" "$root" && mount -o remount,bind,ro "$root" \
        && mount --bind "$root/var/lib/thumbpipe" "$root/var/lib/thumbpipe" \
        && mount -o remount,bind,rw "$root/var/lib/thumbpipe" \
        && mount --rbind /dev "$root/dev" && mount -t proc proc "$root/proc" \
        && mount -t tmpfs tmpfs "$root/tmp" || exit 125
    exec chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin LANG=C.UTF-8 /bin/sh -c "
        set -a; OUTPUT=/var/lib/thumbpipe/family; OPTIONS=; . /etc/thumbpipe/family.conf; set +a
        exec setpriv --reuid=thumbpipe --regid=thumbpipe --init-groups --no-new-privs --inh-caps=-all \
            --bounding-set=-all /usr/libexec/thumbpipe/nightly run family"
' sh "$ROOT" >"$WORK/service.log" 2>&1 || { cat "$WORK/service.log" >&2; fail "the service's ExecStart"; }
# ExecStopPost=+: the metrics copied into node-exporter's folder with full privileges.
in_root '/usr/libexec/thumbpipe/nightly publish family' >>"$WORK/service.log" 2>&1 \
    || { cat "$WORK/service.log" >&2; fail "the service's ExecStopPost"; }
python3 - "$ROOT/var/lib/thumbpipe/family/.thumbpipe/report.json" <<'PY' || fail "the service's run was not fully sandboxed"
import json, sys
sandbox = json.load(open(sys.argv[1]))["sandbox"]
for layer in ("namespaces", "Landlock", "seccomp", "no capabilities", "not root"):
    assert layer in sandbox, sandbox
PY
grep -q 'thumbpipe_items{collection="family",outcome="done"} 4' "$ROOT/var/lib/prometheus/node-exporter/thumbpipe-family.prom" \
    || fail "the metrics were not published to node-exporter's textfile folder"
echo "test-install: nightly service: user thumbpipe, units verified and disabled, ExecStart as thumbpipe under the unit's hardening (sandbox whole, 4 items, metrics published): ok"

# The timer fired for real: the root booted by systemd-nspawn (its systemd as PID 1),
# the timer enabled with a drop-in that fires it 5 s after boot. The service ran as its unit says, and its workers kept their
# own root (Landlock is left out of the check: nspawn's own seccomp filter refuses it).
# The container is stopped once the run's metrics are published, at most 90 s in.
rm -rf "$ROOT/var/lib/thumbpipe/family" "$ROOT/var/lib/thumbpipe/metrics" "$ROOT/var/lib/prometheus/node-exporter"/*
mkdir -p "$ROOT/etc/systemd/system/thumbpipe-nightly@family.timer.d"
printf '[Timer]\nOnCalendar=\nOnActiveSec=5s\nRandomizedDelaySec=0\n' \
    >"$ROOT/etc/systemd/system/thumbpipe-nightly@family.timer.d/now.conf"
in_root 'apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends systemd-sysv dbus >/dev/null 2>&1 \
    && systemctl enable thumbpipe-nightly@family.timer' >"$WORK/enable.log" 2>&1 \
    || { cat "$WORK/enable.log" >&2; fail "enabling the timer"; }
timeout 90 unshare --mount --fork sh -c 'mkdir -p /run/systemd/nspawn && mount -t tmpfs tmpfs /run/systemd/nspawn \
    && exec systemd-nspawn -D "$1" --boot --register=no --keep-unit --console=pipe' sh "$ROOT" >"$WORK/boot.log" 2>&1 &
booted=$!
# Stopped as soon as the run's metrics are published (ExecStopPost, the run's last step).
for _ in $(seq 90); do
    [ -f "$ROOT/var/lib/prometheus/node-exporter/thumbpipe-family.prom" ] && break
    sleep 1
done
kill "$booted" 2>/dev/null; wait "$booted" 2>/dev/null || true
python3 - "$ROOT/var/lib/thumbpipe/family/.thumbpipe/report.json" <<'PY' || { tail -n 30 "$WORK/boot.log" >&2; fail "the timer's run"; }
import json, sys
report = json.load(open(sys.argv[1]))
sandbox = report["sandbox"]
for layer in ("a root of its own", "seccomp", "no capabilities", "not root"):
    assert layer in sandbox, sandbox
assert report["counts"]["succeeded"] == 4, report["counts"]
PY
grep -q 'thumbpipe_last_exit_status{collection="family"} 0' "$ROOT/var/lib/prometheus/node-exporter/thumbpipe-family.prom" \
    || fail "the timer's run published no metrics"
echo "test-install: nightly timer fired in a booted systemd (systemd-nspawn): 4 items, workers in a root of their own, not root, metrics published: ok"

# 2. The image: entrypoint, user, labels; then the same job in a container.
buildah "${B[@]}" inspect --type image "$IMAGE" >"$WORK/image.json"
python3 - "$WORK/image.json" "$VERSION" <<'PY' || fail "image configuration"
import json, sys
config, version = json.load(open(sys.argv[1]))["OCIv1"]["config"], sys.argv[2]
labels = config.get("Labels") or {}
assert config.get("Entrypoint") == ["thumbpipe"], config.get("Entrypoint")
assert config.get("User") not in (None, "", "0", "root", "0:0"), config.get("User")
assert labels.get("org.opencontainers.image.version") == version, labels
assert labels.get("org.opencontainers.image.revision") not in (None, "", "unknown"), labels
PY
# A rebuild replaces the image under its name and leaves no untagged copy behind
# (each is half a gigabyte in vfs storage; a CI run once failed on a full disk).
orphans=$(buildah "${B[@]}" images --noheading --no-trunc \
    --filter "label=org.opencontainers.image.title=thumbpipe" --format '{{.ID}} {{.Name}}' | grep -c ' <none>' || true)
[ "$orphans" = 0 ] || fail "$orphans untagged thumbpipe images left by earlier builds (build-image.sh removes the one it replaces)"
mkdir -p "$WORK/container-out"
chmod 0777 "$WORK/container-out"
ctr=$(buildah "${B[@]}" from --pull=never "$IMAGE")
buildah "${B[@]}" run --isolation chroot -v "$ROOT/home/user/collection:/collection:ro" \
    -v "$WORK/container-out:/out" "$ctr" -- thumbpipe run /collection -r -o /out/job -q \
    >"$WORK/container.log" 2>&1 || { cat "$WORK/container.log" >&2; fail "thumbpipe run in the container"; }
citems=$(buildah "${B[@]}" run --isolation chroot -v "$WORK/container-out:/out" "$ctr" -- \
    thumbpipe inspect /out/job/items.archive --json | grep -c '"itemKey"') || true
[ "$citems" = 4 ] || fail "the container's archive lists $citems items, not 4"
cmp -s "$WORK/container-out/job/items.archive" "$ROOT/home/user/out/items.archive" \
    || fail "the container's archive differs from the .deb's"
owner=$(stat -c %u "$WORK/container-out/job/items.archive")
[ "$owner" != 0 ] || fail "the container wrote as root"
echo "test-install: image $IMAGE (entrypoint thumbpipe, user $owner, OCI labels) ran the same job with buildah run: archive identical: ok"
