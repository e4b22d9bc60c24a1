#!/bin/sh
# The sandbox image's install steps, shared by the Dockerfile's builder stage and by
# tests/deploy/test_dockerfile.py (which runs them in a fresh venv). Uses whatever `python` is
# first on PATH; run from the repository root.
#
#   sh docker/install.sh deps   install requirements/service.lock (pinned, with hashes)
#   sh docker/install.sh app    build the glassllm wheel and install it, no dependencies
#
# Build-time inputs, both optional: PIP_INDEX (the index the build machine uses) and a
# CA bundle at /run/secrets/pip_ca (a BuildKit secret, for a network that re-signs TLS).
# Network steps retry with backoff (docker/retry.sh).
set -eu
. "$(dirname "$0")/retry.sh"
if [ -n "${PIP_INDEX:-}" ]; then export PIP_INDEX_URL="$PIP_INDEX"; fi
if [ -f /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi
case "${1:-}" in
deps)
    retry python -m pip install --no-cache-dir --quiet --require-hashes --no-deps \
        -r requirements/service.lock
    ;;
app)
    rm -rf dist
    retry python -m pip wheel --no-cache-dir --quiet --no-deps --wheel-dir dist .
    python -m pip install --no-cache-dir --quiet --no-deps --no-index dist/glassllm-*.whl
    rm -rf dist build
    ;;
*)
    echo "usage: sh docker/install.sh deps|app" >&2
    exit 2
    ;;
esac
