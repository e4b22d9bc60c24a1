# Gradescope's autograder, run here: the zip's files (`make gradescope-autograder`, also
# unpacked in dist/gradescope-autograder/, this build's context) installed by its own
# setup.sh into Gradescope's layout on the course image's base, then
# /autograder/run_autograder per submission (docker/grader/test.sh).
ARG BASE=python:3.12-slim
FROM ${BASE}
ARG BASE
ARG PIP_INDEX=
LABEL org.opencontainers.image.title="glassllm Gradescope autograder (local run)" \
      org.opencontainers.image.base.name="${BASE}"
COPY autograder/ /autograder/source/
RUN --mount=type=secret,id=pip_ca \
    if [ -n "$PIP_INDEX" ]; then export PIP_INDEX_URL="$PIP_INDEX"; fi; \
    if [ -f /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi; \
    mkdir -p /autograder/submission /autograder/results \
    && cp /autograder/source/run_autograder /autograder/run_autograder \
    && sh /autograder/source/setup.sh
CMD ["/autograder/run_autograder"]
