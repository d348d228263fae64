# One image, two entrypoints:
#   docker run -p 8000:8000 lakefs-mirror                            # lakefs-core run (the server)
#   docker run -p 8008:8008 lakefs-mirror lakefs-replication run     # the replication service
# Configuration: a YAML file named by LAKEFS_CONFIG_FILE / REPLICATION_CONFIG_FILE,
# plus LAKEFS_* / REPLICATION_* environment variables (see config/ for examples).

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/lakefs-mirror
COPY pyproject.toml README.md ./
COPY lakefs_core ./lakefs_core
COPY replication ./replication
COPY mirrors_db ./mirrors_db
COPY lakectl ./lakectl
RUN /opt/lakefs-mirror/bin/pip install --upgrade pip \
 && /opt/lakefs-mirror/bin/pip install .

FROM python:${PYTHON_VERSION}-slim
LABEL org.opencontainers.image.title="lakefs-mirror" \
      org.opencontainers.image.description="lakeFS-compatible versioning server with transactional multi-region mirroring"
ENV PATH=/opt/lakefs-mirror/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LAKEFS_DATA_DIR=/var/lib/lakefs-mirror \
    LAKEFS_LISTEN_ADDRESS=0.0.0.0:8000 \
    REPLICATION_LISTEN_ADDRESS=0.0.0.0:8008
RUN groupadd --system --gid 10001 lakefs \
 && useradd --system --uid 10001 --gid lakefs --home-dir /var/lib/lakefs-mirror --no-create-home lakefs \
 && mkdir -p /var/lib/lakefs-mirror \
 && chown lakefs:lakefs /var/lib/lakefs-mirror
COPY --from=build /opt/lakefs-mirror /opt/lakefs-mirror
USER 10001:10001
WORKDIR /var/lib/lakefs-mirror
VOLUME ["/var/lib/lakefs-mirror"]
EXPOSE 8000 8008
CMD ["lakefs-core", "run"]
