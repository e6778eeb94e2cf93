# One image for every Switchyard process: `switchyard api | worker | beat | fleet | db upgrade` (compose.yaml runs
# each one as a service and gives each the health check that fits it; the one below fits `switchyard api`).
#
# Stage `build` installs the platform and what it needs (switchyard-platform, -agents, -accelerator; not the SDK, the
# meta-distribution or any dev tool) into a virtual environment. The final stage is the slim base plus that
# environment: no pip in it, no build backend, sources, tests or benchmarks, and it runs as an unprivileged user.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY accelerator/ accelerator/
COPY agents/ agents/
COPY platform/ platform/
COPY migrations/ migrations/
# The platform wheel carries migrations/ (the Alembic environment `switchyard db upgrade` runs).
RUN python -m venv --without-pip /opt/switchyard \
    && pip --python /opt/switchyard/bin/python install --no-cache-dir --compile ./accelerator ./agents ./platform

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/switchyard/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SWITCHYARD_HOST=0.0.0.0 \
    SWITCHYARD_DATA_DIR=/var/lib/switchyard
# beat keeps its schedule in the data directory, so the unprivileged user owns it
RUN useradd --system --no-log-init --uid 10001 --user-group --create-home --home-dir /var/lib/switchyard switchyard
COPY --from=build /opt/switchyard /opt/switchyard
USER 10001:10001
WORKDIR /var/lib/switchyard
# 8000: the API (SWITCHYARD_PORT); 8001: the fleet process (the port of SWITCHYARD_FLEET_URL)
EXPOSE 8000 8001
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SWITCHYARD_PORT', '8000'), timeout=4)"]
CMD ["switchyard", "api"]
