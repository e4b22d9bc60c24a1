#!/bin/sh
# `make docker-save`: the image as a tarball to carry into an offline course network,
#   docker load -i glassllm.tar.gz
#   sh docker/save.sh [TAG] [FILE]      default glassllm:latest, dist/glassllm-image.tar.gz
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/client.sh"
tag=${1:-glassllm:latest}
out=${2:-dist/glassllm-image.tar.gz}
mkdir -p "$(dirname "$out")"
$DOCKER image inspect "$tag" >/dev/null 2>&1 || { echo "no image $tag: run make docker" >&2; exit 1; }
$DOCKER save "$tag" | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
echo "docker-save: $out $(du -h "$out" | cut -f1) ($tag; load it with: docker load -i $out)"
