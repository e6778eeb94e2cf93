"""Observing Celery jobs: how long each waited in its queue, a span per job continuing the sender's trace, and
the worker process's own ``/metrics`` port, JSON logs and tracing.

Every process that sends jobs (API processes, workers, beat) stamps each message with its send time and the
current trace context (``traceparent``); the worker that runs it measures the lag from that stamp, opens a span
``job {task}`` under the sender's span and counts the job by its final state.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from celery.signals import before_task_publish, task_postrun, task_prerun
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from switchyard.platform.observability.logs import configure_process_logging, log_context
from switchyard.platform.observability.metrics import JOB_LAG_SECONDS, JOBS
from switchyard.platform.observability.tracing import configure_tracing, tracer
from switchyard.platform.settings import Settings

__all__ = ["SENT_AT_HEADER", "observe_jobs", "observe_process", "serve_metrics"]

log = logging.getLogger(__name__)
SENT_AT_HEADER = "switchyard_sent_at"
_running: dict[str, contextlib.ExitStack] = {}


def _stamp(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is None:
        return
    headers[SENT_AT_HEADER] = time.time()
    propagate.inject(headers)  # traceparent of the current span, when one is recorded


def _header(task: Any, name: str) -> Any:
    request = task.request
    value = getattr(request, name, None)
    if value is None:
        value = (getattr(request, "headers", None) or {}).get(name)
    return value


def _started(task_id: str = "", task: Any = None, **_: Any) -> None:
    if task is None:
        return
    queue = str((task.request.delivery_info or {}).get("routing_key") or "unknown")
    sent_at = _header(task, SENT_AT_HEADER)
    lag_s = max(0.0, time.time() - float(sent_at)) if sent_at is not None else None
    if lag_s is not None:
        JOB_LAG_SECONDS.labels(queue, task.name).observe(lag_s)
    carrier = {k: v for k in ("traceparent", "tracestate") if (v := _header(task, k)) is not None}
    stack = contextlib.ExitStack()
    span = stack.enter_context(
        tracer().start_as_current_span(f"job {task.name}", context=propagate.extract(carrier), kind=SpanKind.CONSUMER)
    )
    if span.is_recording():
        span.set_attributes(
            {
                "messaging.system": "celery",
                "messaging.operation.type": "process",
                "messaging.destination.name": queue,
                "messaging.message.id": task_id,
                "switchyard.job_lag_s": lag_s if lag_s is not None else -1.0,
            }
        )
    stack.enter_context(log_context(job_id=task_id))
    _running[task_id] = stack


def _finished(task_id: str = "", task: Any = None, state: str | None = None, **_: Any) -> None:
    if task is not None:
        JOBS.labels(task.name, state or "UNKNOWN").inc()
    stack = _running.pop(task_id, None)
    if stack is None:
        return
    if state == "FAILURE":
        trace.get_current_span().set_status(Status(StatusCode.ERROR))
    stack.close()


def observe_jobs() -> None:
    """Stamp sent jobs and observe the jobs this process runs (idempotent: connected once per process)."""
    before_task_publish.connect(_stamp, weak=False, dispatch_uid="switchyard.observability.stamp")
    task_prerun.connect(_started, weak=False, dispatch_uid="switchyard.observability.started")
    task_postrun.connect(_finished, weak=False, dispatch_uid="switchyard.observability.finished")


def serve_metrics(host: str, port: int) -> None:
    """Serve this process's ``/metrics`` on ``host:port`` from a thread (0: do nothing)."""
    if not port:
        return
    import os

    from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # a prefork pool: every child writes its values there
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    start_http_server(port, addr=host, registry=registry)
    log.info("metrics at http://%s:%d/metrics", host, port)


def observe_process(settings: Settings, *, service: str, metrics: bool = False) -> None:
    """JSON logs and tracing for a worker or beat process, and (``metrics``) its ``/metrics`` port."""
    configure_process_logging(settings.log_level)
    configure_tracing(settings.otlp_endpoint, service=service)
    if metrics:
        serve_metrics(settings.host, settings.metrics_port)
