# A PrairieLearn external-grader image: `glassllm grade --platform prairielearn` reads
# /grade/tests/*.toml (the question's exercise file), /grade/student (the submission) and
# /grade/data/data.json (params.student), and writes /grade/results/results.json
# (docs/grading.md). No network is needed: PrairieLearn runs graders with networking off.
#
# Built by docker/grader/test.sh on the course image's own base (BASE), with the course
# image's venv (glassllm and NumPy, already built: nothing is downloaded here):
#   docker build -f docker/grader/prairielearn.Dockerfile --build-arg BASE=... \
#       --build-arg COURSE_IMAGE=glassllm:latest -t glassllm-grader-prairielearn .
ARG BASE=python:3.12-slim
ARG COURSE_IMAGE=glassllm:latest
FROM ${COURSE_IMAGE} AS course

FROM ${BASE}
ARG BASE
LABEL org.opencontainers.image.title="glassllm PrairieLearn grader" \
      org.opencontainers.image.base.name="${BASE}"
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1
COPY --from=course /opt/venv /opt/venv
# The private Python made now (not per job), the venv and every other Python package of
# the base closed to all but root, /tmp and /var/tmp root's only (lock_image.sh).
RUN --mount=type=bind,source=docker/grader/lock_image.sh,target=/lock_image.sh \
    sh /lock_image.sh /opt/venv
# Runs as root, as PrairieLearn starts it: the grader closes /grade (0700), then runs the
# student's code as a fresh user of its own, chrooted into the private Python's directory
# (Docker's default capabilities allow chroot, not namespaces): it sees only the standard
# library, its NumPy copy and its own directory.
CMD ["glassllm", "grade", "--platform", "prairielearn"]
