#!/bin/sh
# Make the local base image when the official Python image cannot be pulled (a course
# network that reaches only Debian's archive): Debian minbase + python3, python3-venv and
# ca-certificates, from the mirror this machine's apt already uses (docker/apt_mirror.py),
# made with mmdebstrap (apt downloads in parallel and installs in one go: ~30 s here,
# where debootstrap took over 4 minutes), then `docker import`. The base trusts only
# Debian's own CAs.
#
#   sh docker/base.sh [TAG]      default TAG: glassllm-base:<codename>
#
# Needs root (or user namespaces) and a running Docker engine. Installs mmdebstrap if
# missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/retry.sh"
DOCKER=${DOCKER:-docker}

set -- $(python3 "$here/apt_mirror.py") "${1:-}"
mirror=$1 suite=$2 tag=${3:-glassllm-base:$2}

if ! command -v mmdebstrap >/dev/null 2>&1; then
    retry sh "$here/../tools/apt_get.sh" update -qq   # waits for another apt's lock
    retry env DEBIAN_FRONTEND=noninteractive sh "$here/../tools/apt_get.sh" install -y -qq \
        mmdebstrap
fi

work=$(mktemp -d /tmp/glassllm-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "base: mmdebstrap $suite from $mirror"
# What a container never needs is never unpacked: docs (but each package's copyright),
# man pages, info, locales; nor are package lists, apt's cache and logs kept.
# A failed try leaves no image: the tarball is imported only when complete.
attempt() {
    rm -f "$work/rootfs.tar"
    mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='rm -rf "$1"/var/log/* "$1"/tmp/* "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
        "$suite" "$work/rootfs.tar" "$mirror" > "$work/mmdebstrap.log" 2>&1 \
        || { tail -20 "$work/mmdebstrap.log" >&2; return 1; }
}
retry attempt

$DOCKER import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$work/rootfs.tar" "$tag"
echo "base: $tag ($($DOCKER image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
