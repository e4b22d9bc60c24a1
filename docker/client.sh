# Sourced by the docker/ scripts: DOCKER, a Docker client, and BUILD, a build command
# with BuildKit (the Dockerfile mounts a secret). Newer clients build with BuildKit only
# through the buildx plugin; Debian's docker.io client has BuildKit built in.
DOCKER=${DOCKER:-docker}
if $DOCKER buildx version >/dev/null 2>&1; then
    BUILD="$DOCKER buildx build --load"
else
    # A client without buildx: the engine package's own client (same version as dockerd)
    # builds with its built-in BuildKit when DOCKER_BUILDKIT=1.
    engine_client=$(dpkg -L docker.io 2>/dev/null | grep -m1 '/bin/docker$' || true)
    BUILD="env DOCKER_BUILDKIT=1 ${engine_client:-$DOCKER} build"
fi
