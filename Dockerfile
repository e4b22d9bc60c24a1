# The gradient sandbox (SPEC Part H) as an image. Nothing is fetched at run time:
# Swagger UI assets come from the fastapi-offline wheel, the page from the glassllm wheel.
#   docker build -t glassllm . && docker run -p 8000:8000 glassllm
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 sandbox
WORKDIR /src

# 1. Dependencies only: this layer is rebuilt when pyproject.toml changes, not the code.
COPY pyproject.toml docker/install.sh ./
RUN sh install.sh deps

# 2. The source, built into a wheel and installed with its service extra.
COPY . .
RUN sh docker/install.sh app && rm -rf /src/dist /src/build

USER sandbox
WORKDIR /home/sandbox
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
CMD ["glassllm-sandbox", "--host", "0.0.0.0", "--port", "8000", "--workers", "1"]
