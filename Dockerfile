# The gradient sandbox (SPEC Part H) as an image for a course network.
# Nothing is fetched at run time: Swagger UI assets come from the fastapi-offline wheel,
# the page from the glassllm wheel. Build with `make docker` (it picks or makes the base
# and passes the build machine's pip index and CA as build-time-only inputs):
#   make docker && docker run --rm -p 8000:8000 glassllm
#
# BASE: the official slim Python image, or a local Debian base with python3 and
# python3-venv (docker/base.sh makes one from Debian's archive when no image registry
# is reachable). Both stages start from it, so the venv's interpreter is the base's own.
ARG BASE=python:3.12-slim

# --- builder: the only stage that downloads; the final image gets just /opt/venv -------
FROM ${BASE} AS builder
# Build-time only, never in the final image: the package index (empty: pip's default)
# and, as the BuildKit secret "pip_ca", the CA bundle of a network that re-signs TLS.
ARG PIP_INDEX=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# 1. The locked dependencies (requirements/service.lock, with hashes), and the client's
#    dependencies as wheels for this image's Python and platform (the wheelhouse inside
#    /opt/venv that the sandbox serves at /simple/, so a notebook on a network with no
#    other index can `pip install --index-url http://sandbox:8000/simple/ "glassllm[client]"`):
#    this layer is rebuilt when the lock changes, not when the code does.
COPY requirements/service.lock requirements/service.lock
COPY docker/install.sh docker/retry.sh docker/
RUN --mount=type=secret,id=pip_ca sh docker/install.sh deps && sh docker/install.sh wheelhouse

# 2. The source, built into a wheel and installed without touching the dependencies;
#    then pip itself goes: the final image installs nothing.
COPY . .
RUN --mount=type=secret,id=pip_ca sh docker/install.sh app \
    && python -m pip uninstall --quiet --yes pip setuptools

# --- the image: the base, the venv, a non-root user; no compiler, no pip -----------------
FROM ${BASE}
ARG BASE
LABEL org.opencontainers.image.title="glassllm sandbox" \
      org.opencontainers.image.base.name="${BASE}"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN useradd --system --uid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin sandbox
COPY --from=builder /opt/venv /opt/venv
USER 10001:10001
WORKDIR /tmp
EXPOSE 8000
# Every GLASSLLM_* setting (service/glassllm_service/settings.py, docs/deploy.md) is read from the
# environment as it is: `docker run -e GLASSLLM_MAX_BODY_BYTES=...`. None is set here.
# Runs locked down: --read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
# --workers auto: one worker per CPU of the container's quota (service/glassllm_service/cpus.py).
CMD ["glassllm-sandbox", "--host", "0.0.0.0", "--port", "8000", "--workers", "auto"]
