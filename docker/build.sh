#!/bin/sh
# `make docker`: build the sandbox image (default tag glassllm:latest).
#
# Base: the official slim Python image when it can be pulled, else the local Debian base
# (docker/base.sh makes it from this machine's apt mirror). The build machine's pip index
# and CA bundle reach the builder stage only (a build arg and a BuildKit secret); the
# repository names neither.
#
#   sh docker/build.sh [TAG]        env: BASE=... to force a base, DOCKER=... a client
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/retry.sh"
. "$here/client.sh"
tag=${1:-glassllm:latest}
official=python:3.12-slim

# --- the base ---------------------------------------------------------------------------
if [ -z "${BASE:-}" ]; then
    if $DOCKER image inspect "$official" >/dev/null 2>&1 \
            || timeout 60 $DOCKER pull -q "$official" >/dev/null 2>&1; then
        BASE=$official
    else
        codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
        BASE=glassllm-base:$codename
        echo "build: $official cannot be pulled; using the local base $BASE"
        $DOCKER image inspect "$BASE" >/dev/null 2>&1 || sh "$here/base.sh" "$BASE"
    fi
fi

# --- what pip uses on this machine, for the builder stage only --------------------------
index=${PIP_INDEX_URL:-$(python3 -m pip config get global.index-url 2>/dev/null || true)}
case "$index" in http://*|https://*) ;; *) index= ;; esac   # file:// is not in the build
ca=${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}
[ -n "$ca" ] && [ -f "$ca" ] || ca=/etc/ssl/certs/ca-certificates.crt
secret=
[ -f "$ca" ] && secret="--secret id=pip_ca,src=$ca"

echo "build: $tag FROM $BASE${index:+ (index $index)}${secret:+ (build-time CA $ca)}"
start=$(date +%s)
# The build downloads (pip): retried with backoff like every network step.
# shellcheck disable=SC2086
retry $BUILD --build-arg "BASE=$BASE" --build-arg "PIP_INDEX=$index" $secret \
    -t "$tag" "$here/.."
echo "build: $tag built in $(( $(date +%s) - start )) s"
