#!/bin/sh
# A grader image's files closed to every user but root, once, when the image is built
# (docker/grader/prairielearn.Dockerfile; Gradescope's setup.sh, from the zip): the
# student's code runs as a user of its own, in the private Python's directory where the
# grader may chroot, and even where it may not, that user reads no Python package but the
# standard library and the private Python's NumPy copy (docs/grading.md).
#
#   sh lock_image.sh VENV       (the grader's venv: glassllm, NumPy, their packages)
#
# - makes the private Python (glassllm grade --prepare), so no run pays for it;
# - VENV: no access for group or others, all the way down;
# - every site-packages and dist-packages of the base's Pythons, pip's and ensurepip's
#   wheels (importable archives), Debian's own Python tools and hooks (/usr/share/python3,
#   /etc/python3.*, gcc's and gdb's pretty-printers): the same;
# - /tmp and /var/tmp: 0700 (only the grader, root, writes there).
set -eu
venv=${1:?usage: sh lock_image.sh VENV}
"$venv/bin/glassllm" grade --prepare
chmod -R go-rwx "$venv"
for d in /usr/lib/python3/dist-packages /usr/lib/python3*/site-packages \
         /usr/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
         /usr/local/lib/python3*/dist-packages /usr/share/python-wheels \
         /usr/lib/python3*/ensurepip /usr/local/lib/python3*/ensurepip \
         /usr/share/python3 /etc/python3* /usr/share/gcc /usr/share/gdb; do
    if [ -e "$d" ]; then chmod -R go-rwx "$d"; fi
done
chmod 0700 /tmp /var/tmp
echo "lock_image: $venv, the base's site-packages and wheels, /tmp and /var/tmp closed"
