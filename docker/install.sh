#!/bin/sh
# The sandbox image's install steps, shared by the Dockerfile's builder stage and by
# tests/deploy/test_dockerfile.py (which runs them in a fresh venv). Uses whatever `python` is
# first on PATH; run from the repository root.
#
#   sh docker/install.sh deps        install requirements/service.lock (pinned, with hashes)
#   sh docker/install.sh wheelhouse  the client's dependencies as wheels for this Python and
#                                    platform, into the venv's share/glassllm/wheelhouse:
#                                    the sandbox's /simple/ index serves them (no other index)
#   sh docker/install.sh app         build the glassllm wheel and install it, no dependencies
#                                    (and keep the wheel in the wheelhouse, when there is one)
#
# Build-time inputs, both optional: PIP_INDEX (the index the build machine uses) and a
# CA bundle at /run/secrets/pip_ca (a BuildKit secret, for a network that re-signs TLS).
# Network steps retry with backoff (docker/retry.sh).
set -eu
. "$(dirname "$0")/retry.sh"
if [ -n "${PIP_INDEX:-}" ]; then export PIP_INDEX_URL="$PIP_INDEX"; fi
if [ -f /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi
# where the installed sandbox looks for its wheelhouse by default (glassllm_service.routes.dist)
wheelhouse=$(python -c 'import sys; print(sys.prefix)')/share/glassllm/wheelhouse
case "${1:-}" in
deps)
    retry python -m pip install --no-cache-dir --quiet --require-hashes --no-deps \
        -r requirements/service.lock
    ;;
wheelhouse)
    # numpy at the service's own pinned version; httpx and the rest resolved by pip for
    # this interpreter and platform (binary wheels only: the course network has no compiler)
    numpy=$(sed -n 's/^numpy==\([^ ]*\).*/\1/p' requirements/service.lock)
    retry python -m pip download --no-cache-dir --quiet --only-binary=:all: \
        --dest "$wheelhouse" "numpy==$numpy" "httpx>=0.27"
    ;;
app)
    rm -rf dist
    retry python -m pip wheel --no-cache-dir --quiet --no-deps --wheel-dir dist .
    python -m pip install --no-cache-dir --quiet --no-deps --no-index dist/glassllm-*.whl
    if [ -d "$wheelhouse" ]; then cp dist/glassllm-*.whl "$wheelhouse/"; fi
    rm -rf dist build
    ;;
*)
    echo "usage: sh docker/install.sh deps|wheelhouse|app" >&2
    exit 2
    ;;
esac
