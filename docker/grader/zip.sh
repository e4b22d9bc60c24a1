#!/bin/sh
# `make gradescope-autograder`: Gradescope's autograder zip for one exercise file.
#
#   sh docker/grader/zip.sh PYTHON [EXERCISE]    (default examples/softmax-backward.toml)
#
#   SALT_FILE=course-salt ROSTER=students.csv sh docker/grader/zip.sh PYTHON [EXERCISE]
#   PRACTICE=1 sh docker/grader/zip.sh PYTHON [EXERCISE]      (practice work: no salt)
#
# Writes dist/gradescope-autograder.zip (upload it as the assignment's autograder) and the
# same files unpacked under dist/gradescope-autograder/autograder/ (docker/grader/test.sh
# builds its local run from them). The zip holds setup.sh and run_autograder (Gradescope's
# layout), lock_image.sh (setup.sh closes the image's files with it), the exercise file,
# the course's salt as `salt` and roster as `roster.csv` (/autograder/source/ on
# Gradescope, which students never see; setup.sh makes them 0600), requirements.txt (NumPy
# pinned as requirements/service.lock pins it) and wheels/: glassllm's wheel, and NumPy's
# for this machine's Python when pip can fetch it (setup.sh falls back to the package
# index for another Python). Without SALT_FILE and ROSTER it stops, saying so, unless
# PRACTICE=1 (run_autograder then grades with --practice).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${1:?usage: sh docker/grader/zip.sh PYTHON [EXERCISE]}
case $python in /*) ;; */*) python=$(pwd)/$python ;; esac
exercise=${2:-$root/examples/softmax-backward.toml}
case $exercise in /*) ;; *) exercise=$(pwd)/$exercise ;; esac
. "$root/docker/retry.sh"
salt=${SALT_FILE:-}
roster=${ROSTER:-}
if [ "${PRACTICE:-}" != 1 ] && { [ -z "$salt" ] || [ -z "$roster" ]; }; then
    echo "gradescope-autograder: give SALT_FILE=FILE (the course's salt) and ROSTER=FILE" \
        "(the roster's CSV), or PRACTICE=1 for practice work" >&2
    exit 2
fi
out=$root/dist/gradescope-autograder
rm -rf "$out" "$root/dist/gradescope-autograder.zip"
mkdir -p "$out/autograder/wheels"
cp "$here/gradescope/setup.sh" "$here/gradescope/run_autograder" "$here/lock_image.sh" \
    "$out/autograder/"
"$python" -m glassllm.apps.cli exercises check "$exercise" >/dev/null
cp "$exercise" "$out/autograder/"
extra=
if [ "${PRACTICE:-}" = 1 ]; then
    sed -i 's/--platform gradescope/--platform gradescope --practice/' "$out/autograder/run_autograder"
else
    "$python" -c "from glassllm.course.grader import identity, salt; import sys; \
salt.read_salt_file(sys.argv[1]); identity.load_roster(sys.argv[2])" "$salt" "$roster"
    cp "$salt" "$out/autograder/salt"
    cp "$roster" "$out/autograder/roster.csv"
    extra="salt roster.csv"
fi
numpy=$(grep -m1 '^numpy==' "$root/requirements/service.lock" | cut -d' ' -f1)
echo "$numpy" > "$out/autograder/requirements.txt"
retry "$python" -m pip wheel --quiet --no-deps --wheel-dir "$out/autograder/wheels" "$root"
rm -rf "$root/build"
retry "$python" -m pip download --quiet --only-binary=:all: --no-deps \
    --dest "$out/autograder/wheels" "$numpy" \
    || echo "gradescope-autograder: no NumPy wheel fetched; setup.sh will use the index"
(cd "$out/autograder" && "$python" -m zipfile -c "$root/dist/gradescope-autograder.zip" \
    setup.sh run_autograder lock_image.sh requirements.txt "$(basename "$exercise")" $extra \
    wheels)
echo "gradescope-autograder: dist/gradescope-autograder.zip ($(basename "$exercise"))"
