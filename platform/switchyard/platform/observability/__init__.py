"""Operating Switchyard: Prometheus metrics, OpenTelemetry traces and structured JSON logs.

``metrics`` defines what every process records and renders ``/metrics``; ``tracing`` exports spans over
OTLP/HTTP when ``SWITCHYARD_OTLP_ENDPOINT`` is set; ``logs`` writes JSON records with their request, tenant,
key, run and trace; ``http`` observes HTTP processes (the API's plugin, the fleet process); ``instrument`` wraps
the pool, admission, runs and tools where they are built; ``agent_spans`` traces the agents a run acts as and a
workflow's nodes while the kernel drives it; ``jobs`` observes Celery workers.
"""

from __future__ import annotations

from switchyard.platform.observability.agent_spans import drive_traced
from switchyard.platform.observability.http import TRACE_ID_HEADER, Observability, ObservedApp, observe_fleet
from switchyard.platform.observability.instrument import count_refusals, instrument_pool, traced_run, traced_tools
from switchyard.platform.observability.logs import JsonFormatter, configure_process_logging, log_context, redact
from switchyard.platform.observability.metrics import exposition, prepare_multiprocess_dir
from switchyard.platform.observability.tracing import configure_tracing, current_trace_id, shutdown_tracing

__all__ = [
    "TRACE_ID_HEADER",
    "JsonFormatter",
    "Observability",
    "ObservedApp",
    "configure_process_logging",
    "configure_tracing",
    "count_refusals",
    "current_trace_id",
    "drive_traced",
    "exposition",
    "instrument_pool",
    "log_context",
    "observe_fleet",
    "prepare_multiprocess_dir",
    "redact",
    "shutdown_tracing",
    "traced_run",
    "traced_tools",
]
