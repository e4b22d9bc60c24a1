#!/bin/sh
# Make the local base image when the official Python image cannot be pulled (a course
# network that reaches only Debian's archive): debootstrap minbase + python3,
# python3-venv and ca-certificates, from the mirror this machine's apt already uses
# (docker/apt_mirror.py), then `docker import`. The base trusts only Debian's own CAs.
#
#   sh docker/base.sh [TAG]      default TAG: glassllm-base:<codename>
#
# Needs root (debootstrap) and a running Docker engine. Installs debootstrap if missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/retry.sh"
DOCKER=${DOCKER:-docker}

set -- $(python3 "$here/apt_mirror.py") "${1:-}"
mirror=$1 suite=$2 tag=${3:-glassllm-base:$2}

if ! command -v debootstrap >/dev/null 2>&1; then
    retry apt-get update -qq
    retry env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
fi

rootfs=$(mktemp -d /tmp/glassllm-base.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "base: debootstrap $suite from $mirror into $rootfs"
# A failed debootstrap leaves a half-made tree: start each try from an empty one.
attempt() {
    rm -rf "$rootfs" && mkdir -p "$rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$suite" "$rootfs" "$mirror" > /tmp/glassllm-debootstrap.log 2>&1 \
        || { tail -20 /tmp/glassllm-debootstrap.log >&2; return 1; }
}
retry attempt

# What a container never needs: package lists and caches, docs, man pages, locales.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/* \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/usr/share/locale/* "$rootfs"/tmp/*
# The image's sources list is the mirror apt gave us (for `apt-get` inside, if ever).
echo "deb $mirror $suite main" > "$rootfs/etc/apt/sources.list"

tar -C "$rootfs" -c . | $DOCKER import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$tag"
echo "base: $tag ($($DOCKER image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
