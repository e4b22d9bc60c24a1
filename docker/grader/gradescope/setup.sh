#!/bin/sh
# Gradescope runs this once when it builds the autograder's image (network on): a venv of
# its own with glassllm (the wheel in this zip) and NumPy (pinned in requirements.txt;
# from wheels/ when one there fits this Python, else from the package index).
set -eu
src=/autograder/source
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" 2>/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
fi
python3 -m venv /opt/glassllm-grader
/opt/glassllm-grader/bin/python -m pip install --quiet --no-cache-dir \
    --find-links "$src/wheels" -r "$src/requirements.txt" "$src"/wheels/glassllm-*.whl
# the exercise, the course's salt and roster: readable by root only (the student's code
# runs as nobody)
chmod 600 "$src"/*.toml
for f in "$src/salt" "$src/roster.csv"; do [ ! -f "$f" ] || chmod 600 "$f"; done
