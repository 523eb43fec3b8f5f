#!/usr/bin/env bash
# make deb: .build/thumbpipe_VERSION_amd64.deb from the release build, with
# Debian's own tools: the files staged by `make install-files` under /usr,
# Depends computed by dpkg-shlibdeps from the binary's NEEDED libraries, the
# package built by dpkg-deb, then checked by lintian (no error allowed).
# Usage: packaging/build-deb.sh VERSION REVISION
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:?version} REVISION=${2:?revision}
ARCH=$(dpkg --print-architecture)
NAME=thumbpipe_${VERSION}_${ARCH}
WORK=.build/deb
STAGE=$WORK/$NAME
DEB=.build/$NAME.deb
# Reproducible: every date and mtime from the commit, not the clock.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

rm -rf "$STAGE"
mkdir -p "$STAGE/DEBIAN"
make --no-print-directory -s install-files DESTDIR="$PWD/$STAGE" PREFIX=/usr \
    ZSHCOMPDIR=/usr/share/zsh/vendor-completions >/dev/null
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$STAGE/usr/bin/thumbpipe"
gzip -9n "$STAGE/usr/share/man/man1/thumbpipe.1"

# The nightly service: a template unit and its timer (shipped disabled), the
# script they run, and an example collection file.
install -D -m 0644 "packaging/systemd/thumbpipe-nightly@.service" "$STAGE/lib/systemd/system/thumbpipe-nightly@.service"
install -D -m 0644 "packaging/systemd/thumbpipe-nightly@.timer" "$STAGE/lib/systemd/system/thumbpipe-nightly@.timer"
install -D -m 0755 packaging/systemd/nightly "$STAGE/usr/libexec/thumbpipe/nightly"
install -D -m 0644 packaging/systemd/nightly.conf "$STAGE/usr/share/doc/thumbpipe/examples/nightly.conf"
install -d -m 0755 "$STAGE/etc/thumbpipe"

DOC=$STAGE/usr/share/doc/thumbpipe
install -d "$DOC"
install -m 0644 packaging/copyright "$DOC/copyright"
gzip -9nc README.md > "$DOC/README.md.gz"
for doc in GUIDE ENGINE BENCHMARKS; do gzip -9nc "docs/$doc.md" > "$DOC/$doc.md.gz"; done
gzip -9nc deploy/README.md > "$DOC/deploy.md.gz"
{
    echo "thumbpipe ($VERSION) unstable; urgency=medium"
    echo
    echo "  * Release $VERSION, built from revision $REVISION."
    echo
    echo " -- thumbpipe developers <thumbpipe@users.noreply.github.com>  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$DOC/changelog.gz"
chmod 0644 "$DOC/changelog.gz"

# dpkg-shlibdeps reads a debian/control; it only needs to know the package.
SHLIB=$WORK/shlibdeps
rm -rf "$SHLIB" && mkdir -p "$SHLIB/debian"
printf 'Source: thumbpipe\n\nPackage: thumbpipe\nArchitecture: any\n' > "$SHLIB/debian/control"
depends=$(cd "$SHLIB" && dpkg-shlibdeps -O "$OLDPWD/$STAGE/usr/bin/thumbpipe" | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
# libavcodec is loaded at run time (dlopen, CHevc.h says why), so dpkg-shlibdeps
# cannot see it: the package of the major version the binary was built against.
avcodec="libavcodec$(pkg-config --modversion libavcodec | cut -d. -f1)"
depends="$depends, $avcodec"

cat > "$STAGE/DEBIAN/control" <<CONTROL
Package: thumbpipe
Version: $VERSION
Architecture: $ARCH
Maintainer: thumbpipe developers <thumbpipe@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
Depends: $depends, adduser
Recommends: fonts-dejavu-core, fonts-noto-cjk | fonts-droid-fallback
Section: graphics
Priority: optional
Description: batch photo thumbnails and item archive over libvips
 thumbpipe turns a photo collection into an app-ready item archive: every
 item gets a 40x40-point thumbnail (aspect-filled, centred, clipped to a
 rounded rectangle), archived with the item in an NSKeyedArchiver file, and its
 full-size photo stored as a JPEG, one file per item key. Runs are parallel,
 incremental and shardable across machines; each source is decoded in its own
 worker process, so a file that hangs or crashes a decoder fails alone.
CONTROL
# The service's system user: created on install, never removed (files it owned may remain).
cat > "$STAGE/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    if ! getent passwd thumbpipe >/dev/null; then
        adduser --system --group --quiet --home /var/lib/thumbpipe --no-create-home \
            --gecos "thumbpipe nightly runs" thumbpipe
    fi
    if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true; fi
fi
POSTINST
cat > "$STAGE/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true; fi
POSTRM
chmod 0755 "$STAGE/DEBIAN/postinst" "$STAGE/DEBIAN/postrm"
(cd "$STAGE" && find usr lib -type f -print0 | sort -z | xargs -0 md5sum) > "$STAGE/DEBIAN/md5sums"
chmod 0644 "$STAGE/DEBIAN/control" "$STAGE/DEBIAN/md5sums"
find "$STAGE" -type d -exec chmod 0755 {} +
find "$STAGE" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

rm -f "$DEB"
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$DEB" >/dev/null
echo "build-deb: $DEB ($(du -h "$DEB" | cut -f1)), Depends: $depends"
# lintian must find no error (warnings and notes are printed for a reader).
status=0
lintian --fail-on error --display-info --tag-display-limit 0 "$DEB" >"$WORK/lintian.log" 2>&1 || status=$?
grep -v "running with root privileges" "$WORK/lintian.log" || true
[ $status -eq 0 ] || { echo "build-deb: lintian found errors (exit $status)" >&2; exit 1; }
echo "build-deb: lintian: no errors"
