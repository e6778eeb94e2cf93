# One image for the API, worker and beat processes: `switchyard api|worker|beat`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 SWITCHYARD_HOST=0.0.0.0 SWITCHYARD_DATA_DIR=/data
WORKDIR /app
COPY accelerator accelerator
COPY agents agents
COPY sdk sdk
COPY platform platform
COPY migrations migrations
COPY pyproject.toml README.md ./
RUN pip install --no-cache-dir ./accelerator ./agents ./sdk ./platform . \
    && useradd --system --uid 10001 switchyard && mkdir /data && chown switchyard /data
USER switchyard
EXPOSE 8000
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
CMD ["switchyard", "api"]
