#!/bin/sh
# The grader images, built and run (called by docker/test.sh once the course image is
# built and its engine is up): the PrairieLearn external grader and Gradescope's
# autograder (its zip's setup.sh run in a Gradescope layout), both FROM the course image's
# own base (not rebuilt), then docker/grader/smoke.py runs each with --network none.
#
#   sh docker/grader/test.sh PYTHON COURSE_IMAGE
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/docker/retry.sh"
. "$root/docker/client.sh"
python=${1:?usage: sh docker/grader/test.sh PYTHON COURSE_IMAGE}
course=${2:?usage: sh docker/grader/test.sh PYTHON COURSE_IMAGE}
t0=$(date +%s)
base=$($DOCKER image inspect -f '{{index .Config.Labels "org.opencontainers.image.base.name"}}' "$course")
index=${PIP_INDEX_URL:-$("$python" -m pip config get global.index-url 2>/dev/null || true)}
case "$index" in http://*|https://*) ;; *) index= ;; esac
ca=${PIP_CERT:-$("$python" -m pip config get global.cert 2>/dev/null || true)}
[ -n "$ca" ] && [ -f "$ca" ] || ca=/etc/ssl/certs/ca-certificates.crt
secret=
[ -f "$ca" ] && secret="--secret id=pip_ca,src=$ca"

echo "grader-test: glassllm-grader-prairielearn FROM $base (the venv of $course)"
$BUILD -q -f "$here/prairielearn.Dockerfile" --build-arg "BASE=$base" \
    --build-arg "COURSE_IMAGE=$course" -t glassllm-grader-prairielearn "$root" >/dev/null
# the course's salt and roster of docker/grader/smoke.py's submissions
course_files=$(mktemp -d)
trap 'rm -rf "$course_files"' EXIT
printf 'a-smoke-test-course-salt\n' > "$course_files/salt"
printf 'student_id,display_name,email\nada,Ada,ada@x\n' > "$course_files/roster.csv"
SALT_FILE="$course_files/salt" ROSTER="$course_files/roster.csv" sh "$here/zip.sh" "$python"
echo "grader-test: glassllm-grader-gradescope FROM $base (the zip's setup.sh)"
# shellcheck disable=SC2086
retry $BUILD -q -f "$here/gradescope.Dockerfile" --build-arg "BASE=$base" \
    --build-arg "PIP_INDEX=$index" $secret -t glassllm-grader-gradescope \
    "$root/dist/gradescope-autograder" >/dev/null
"$python" "$here/smoke.py" --prairielearn glassllm-grader-prairielearn \
    --gradescope glassllm-grader-gradescope --docker "$DOCKER"
echo "grader-test: $(( $(date +%s) - t0 )) s"
