# The hpcbridge image: the hook server (gunicorn, the default command) and the log Pods'
# program (python -m hooks.pods.logs). Build: `make image` (docs/operations.md). The builder stage installs the
# hash-pinned requirements.lock into a virtualenv without pip; the final image gets that
# virtualenv and the hooks package, and has no pip or setuptools.
FROM python:3.11-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

COPY requirements.lock /tmp/requirements.lock
RUN python -m venv --without-pip /opt/hpcbridge \
    && pip --python /opt/hpcbridge/bin/python install --no-cache-dir --require-hashes \
        --no-deps --only-binary=:all: -r /tmp/requirements.lock

FROM python:3.11-slim-bookworm

# VERSION is the package's (hooks/__init__.py), checked below: `make image` passes it.
ARG VERSION
ARG REVISION=unknown
LABEL org.opencontainers.image.title="hpcbridge" \
      org.opencontainers.image.description="Metacontroller hooks that run Kubernetes BatchJobs on SLURM and HTCondor over SSH" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

ENV PATH=/opt/hpcbridge/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2

RUN /usr/local/bin/python -m pip uninstall --yes --no-cache-dir pip setuptools wheel

COPY --from=build /opt/hpcbridge /opt/hpcbridge
WORKDIR /app
COPY hooks/ hooks/
RUN python -c 'import sys, hooks; sys.exit(None if sys.argv[1:] == [hooks.__version__] else \
        f"--build-arg VERSION must be {hooks.__version__}, the version in hooks/__init__.py")' \
        "$VERSION"

# The hook server and the log fetcher (python -m hooks.pods.logs, the log Pods' command). The hooks
# listen on 8080; 9090 is the probes' port (/healthz, /metrics) that deploy/ turns on with
# HPCBRIDGE_METRICS_PORT.
USER 65532:65532
EXPOSE 8080 9090
CMD ["gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:create_app()"]
