#!/usr/bin/env bash
# make image: the Containerfile built with buildah over the .deb (make deb), on a
# debian:bookworm-slim base, saved as .build/thumbpipe-VERSION.oci.tar.
#
# No image registry is reachable here, so the base is made locally: a minimal
# Debian 12 root from Debian's packages (mmdebstrap --variant=apt, the contents
# of debian:bookworm-slim), cached as CACHE/bookworm-apt.tar and imported into
# buildah's storage as localhost/debian:bookworm-slim. Where the image already
# exists under that name (a registry pull, an earlier import) it is used as is.
# BUILDAH_FLAGS: buildah's global flags (default: vfs storage, which works
# without fuse-overlayfs in containers and chroots).
# Usage: packaging/build-image.sh VERSION REVISION IMAGE CACHE
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:?version} REVISION=${2:?revision} IMAGE=${3:?image} CACHE=${4:?cache folder}
ARCH=$(dpkg --print-architecture)
DEB=.build/thumbpipe_${VERSION}_${ARCH}.deb
BASE=debian:bookworm-slim
read -r -a B <<<"${BUILDAH_FLAGS:---storage-driver vfs}"
[ -f "$DEB" ] || { echo "build-image: $DEB missing (make deb)" >&2; exit 1; }

packaging/debian-root.sh "$CACHE"
ROOT_TAR=$CACHE/bookworm-apt.tar
# The base, imported once per root tarball (its digest is the image's label).
digest=$(sha256sum "$ROOT_TAR" | cut -c1-16)
have=$(buildah "${B[@]}" inspect --type image --format '{{index .ImageAnnotations "thumbpipe.root"}}' "localhost/$BASE" 2>/dev/null || true)
if [ "$have" != "$digest" ]; then
    echo "build-image: importing $ROOT_TAR as localhost/$BASE"
    ctr=$(buildah "${B[@]}" from scratch)
    buildah "${B[@]}" add "$ctr" "$ROOT_TAR" / >/dev/null
    buildah "${B[@]}" config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --annotation "thumbpipe.root=$digest" "$ctr"
    buildah "${B[@]}" commit --quiet --rm "$ctr" "localhost/$BASE" >/dev/null
fi

# A build context of just the .deb (never the whole .build folder).
CONTEXT=.build/image
rm -rf "$CONTEXT" && mkdir -p "$CONTEXT"
cp "$DEB" "$CONTEXT/"
# The image this build replaces under $IMAGE, removed once the new one has the
# name: every rebuild (each `make test`) would otherwise leave a 0.5 GB untagged
# image behind in vfs storage until the disk fills.
previous=$(buildah "${B[@]}" inspect --type image --format '{{.FromImageID}}' "$IMAGE" 2>/dev/null || true)
buildah "${B[@]}" build --quiet --isolation chroot --pull=never --layers=false \
    --build-arg BASE="localhost/$BASE" --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" \
    --build-arg DEB="$(basename "$DEB")" -f Containerfile -t "$IMAGE" "$CONTEXT" >/dev/null
current=$(buildah "${B[@]}" inspect --type image --format '{{.FromImageID}}' "$IMAGE")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
    # Only when nothing else names it: an image the user tagged stays.
    names=$(buildah "${B[@]}" images --noheading --no-trunc --format '{{.ID}} {{.Name}}' 2>/dev/null |
        awk -v id="$previous" '$1 ~ id && $2 != "<none>"' || true)
    [ -n "$names" ] || buildah "${B[@]}" rmi "$previous" >/dev/null 2>&1 || true
fi
OCI=.build/thumbpipe-$VERSION.oci.tar
rm -f "$OCI"
buildah "${B[@]}" push --quiet "$IMAGE" "oci-archive:$OCI:$IMAGE"
echo "build-image: $IMAGE built from $DEB on $BASE; saved as $OCI ($(du -h "$OCI" | cut -f1))"
