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
# the private Python made now (not per submission); the venv, the base's other Python
# packages, /tmp and /var/tmp closed to all but root; the exercise, the course's salt and
# roster and the wheels too: the student's code runs as a user of its own (docs/grading.md)
sh "$src/lock_image.sh" /opt/glassllm-grader
chmod 600 "$src"/*.toml
for f in "$src/salt" "$src/roster.csv"; do [ ! -f "$f" ] || chmod 600 "$f"; done
chmod 700 "$src"
