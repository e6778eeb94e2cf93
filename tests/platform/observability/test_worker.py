"""A real ``switchyard worker`` process: its /metrics port, its jobs' lag and spans under the sender's trace, JSON
logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from switchyard.platform.observability.tracing import configure_tracing, shutdown_tracing, trace_id_of, tracer
from switchyard.platform.settings import Settings
from switchyard.platform.worker import create_celery
from tests.support.ports import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def worker(tmp_path: Path, otlp_receiver: Any) -> Iterator[tuple[int, Path]]:
    """A worker (solo pool) with a metrics port and an OTLP endpoint; yields the port and its log file."""
    port = free_port()
    env = {
        **os.environ,
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_METRICS_PORT": str(port),
        "SWITCHYARD_OTLP_ENDPOINT": otlp_receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # export every 50 ms rather than 5 s
    }
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "switchyard.platform.cli", "worker", "--pool", "solo"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield port, log_path
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _eventually(check: Any, what: str, attempts: int = 600) -> Any:
    for _ in range(attempts):
        try:
            found = check()
        except httpx.HTTPError:
            found = None
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_a_worker_serves_metrics_and_traces_its_jobs_under_the_senders_span(
    worker: tuple[int, Path], otlp_receiver: Any, tmp_path: Path
) -> None:
    port, log_path = worker
    app = create_celery(Settings(data_dir=tmp_path / "data"))
    configure_tracing("", service="sender", exporter=InMemorySpanExporter())
    try:
        with tracer().start_as_current_span("send") as sender:
            result = app.send_task("system.ping", args=[{"hello": "metrics"}])
        sender_trace, sender_span = trace_id_of(sender), format(sender.get_span_context().span_id, "016x")
    finally:
        shutdown_tracing()
    assert result.get(timeout=90)["payload"] == {"hello": "metrics"}

    job = ("switchyard_jobs_total", (("state", "SUCCESS"), ("task", "system.ping")))
    samples = _eventually(lambda: (s := _samples(port)).get(job) and s, "the job counted on the metrics port")
    assert samples[job] == 1
    lag = ("switchyard_job_lag_seconds_count", (("queue", "switchyard.maintenance"), ("task", "system.ping")))
    assert samples[lag] == 1
    assert samples[("switchyard_job_lag_seconds_sum", lag[1])] >= 0

    def job_span() -> Any:
        spans = otlp_receiver.named("job system.ping")
        return spans[0] if spans else None

    span = _eventually(job_span, "the job's span at the collector")
    assert span.trace_id == sender_trace  # the trace of whoever sent the job
    assert span.parent_span_id == sender_span
    assert span.service == "switchyard-worker"
    assert span.attributes["messaging.destination.name"] == "switchyard.maintenance"
    assert span.attributes["messaging.message.id"] == result.id

    records = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    assert any(r["logger"] == "switchyard.platform.observability.jobs" for r in records)  # "metrics at ..."
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
