#!/bin/sh
# `make gradescope-autograder`: Gradescope's autograder zip for one exercise file.
#
#   sh docker/grader/zip.sh PYTHON [EXERCISE]    (default examples/softmax-backward.toml)
#
# Writes dist/gradescope-autograder.zip (upload it as the assignment's autograder) and the
# same files unpacked under dist/gradescope-autograder/autograder/ (docker/grader/test.sh
# builds its local run from them). The zip holds setup.sh and run_autograder (Gradescope's
# layout), lock_image.sh (setup.sh closes the image's files with it), the exercise file,
# requirements.txt (NumPy pinned as requirements/service.lock
# pins it) and wheels/: glassllm's wheel, and NumPy's for this machine's Python when pip
# can fetch it (setup.sh falls back to the package index for another Python).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${1:?usage: sh docker/grader/zip.sh PYTHON [EXERCISE]}
case $python in /*) ;; */*) python=$(pwd)/$python ;; esac
exercise=${2:-$root/examples/softmax-backward.toml}
case $exercise in /*) ;; *) exercise=$(pwd)/$exercise ;; esac
. "$root/docker/retry.sh"
out=$root/dist/gradescope-autograder
rm -rf "$out" "$root/dist/gradescope-autograder.zip"
mkdir -p "$out/autograder/wheels"
cp "$here/gradescope/setup.sh" "$here/gradescope/run_autograder" "$here/lock_image.sh" \
    "$out/autograder/"
"$python" -m glassllm.apps.cli exercises check "$exercise" >/dev/null
cp "$exercise" "$out/autograder/"
numpy=$(grep -m1 '^numpy==' "$root/requirements/service.lock" | cut -d' ' -f1)
echo "$numpy" > "$out/autograder/requirements.txt"
retry "$python" -m pip wheel --quiet --no-deps --wheel-dir "$out/autograder/wheels" "$root"
rm -rf "$root/build"
retry "$python" -m pip download --quiet --only-binary=:all: --no-deps \
    --dest "$out/autograder/wheels" "$numpy" \
    || echo "gradescope-autograder: no NumPy wheel fetched; setup.sh will use the index"
(cd "$out/autograder" && "$python" -m zipfile -c "$root/dist/gradescope-autograder.zip" \
    setup.sh run_autograder lock_image.sh requirements.txt "$(basename "$exercise")" wheels)
echo "gradescope-autograder: dist/gradescope-autograder.zip ($(basename "$exercise"))"
