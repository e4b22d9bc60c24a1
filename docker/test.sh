#!/bin/sh
# `make docker-test`: build the image and check it against the real container.
#
# Installs Debian's Docker engine and compose when they are missing, starts dockerd when none answers
# (and stops that one, by its PID, on the way out), builds with docker/build.sh, then
# runs docker/smoke.py (the image, locked down), docker/compose_smoke.py (the course
# deployment, deploy/compose.yaml) and docker/grader/test.sh (the PrairieLearn and
# Gradescope grader images) with the given Python (httpx, jsonschema). Fails loudly.
#
#   sh docker/test.sh PYTHON [TAG]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/retry.sh"
apt_get="$here/../tools/apt_get.sh"  # waits for another apt's lock (docs/deploy.md)
python=${1:?usage: sh docker/test.sh PYTHON [TAG]}
tag=${2:-glassllm:latest}
t0=$(date +%s)
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo

if ! command -v dockerd >/dev/null 2>&1; then
    echo "docker-test: installing Debian's Docker engine (docker.io)"
    retry $SUDO sh "$apt_get" update -qq
    retry $SUDO env DEBIAN_FRONTEND=noninteractive sh "$apt_get" install -y -qq docker.io \
        >/dev/null
fi
if ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
    echo "docker-test: installing Debian's compose (docker-compose)"
    retry $SUDO sh "$apt_get" update -qq
    retry $SUDO env DEBIAN_FRONTEND=noninteractive sh "$apt_get" install -y -qq docker-compose \
        >/dev/null
fi
. "$here/client.sh"

started=
stop_engine() {
    if [ -n "$started" ]; then
        echo "docker-test: stopping the dockerd it started (PID $started)"
        $SUDO kill "$started" 2>/dev/null || true
        # wait for it, at most 20 s, so containerd's shims are gone too
        i=0; while kill -0 "$started" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.5; i=$((i+1)); done
    fi
}
trap stop_engine EXIT
trap 'exit 130' INT TERM
if ! $DOCKER info >/dev/null 2>&1; then
    log=${TMPDIR:-/tmp}/glassllm-dockerd.log
    echo "docker-test: no Docker engine answers; starting dockerd (log: $log)"
    $SUDO dockerd >"$log" 2>&1 &
    started=$!
    i=0
    until $DOCKER info >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 60 ] || ! kill -0 "$started" 2>/dev/null; then
            echo "docker-test: dockerd did not come up; its log:" >&2
            tail -20 "$log" >&2
            exit 1
        fi
        sleep 0.5
    done
    echo "docker-test: dockerd (PID $started) up after $(( $(date +%s) - t0 )) s"
fi

sh "$here/build.sh" "$tag"
"$python" "$here/smoke.py" --image "$tag" --docker "$DOCKER"
base=$($DOCKER image inspect -f '{{index .Config.Labels "org.opencontainers.image.base.name"}}' "$tag")
"$python" "$here/compose_smoke.py" --base "$base" --image "$tag"
sh "$here/grader/test.sh" "$python" "$tag"
echo "docker-test: total $(( $(date +%s) - t0 )) s"
