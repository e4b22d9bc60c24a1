#!/bin/sh
# The sandbox image's install steps, shared by the Dockerfile and by
# tests/test_dockerfile.py (which runs them in a fresh venv, since no Docker engine runs
# on the CI machines). Uses whatever `python` is first on PATH.
#
#   sh docker/install.sh deps   install the runtime dependencies named in pyproject.toml
#                               (core + service extra) — a layer cached before the source
#   sh docker/install.sh app    build the wheel and install it with its service extra
set -eu
case "${1:-}" in
deps)
    python - <<'PY' > /tmp/glassllm-requirements.txt
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["service"]))
PY
    python -m pip install --no-cache-dir --quiet -r /tmp/glassllm-requirements.txt
    ;;
app)
    rm -rf dist
    python -m pip wheel --no-cache-dir --quiet --no-deps --wheel-dir dist .
    wheel=$(ls dist/glassllm-*.whl)
    python -m pip install --no-cache-dir --quiet "${wheel}[service]"
    ;;
*)
    echo "usage: sh docker/install.sh deps|app" >&2
    exit 2
    ;;
esac
