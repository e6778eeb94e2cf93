"""OpenTelemetry tracing of one process: spans exported over OTLP/HTTP when ``SWITCHYARD_OTLP_ENDPOINT`` is set.

Unset, the tracer is OpenTelemetry's no-op tracer: spans cost next to nothing and carry no trace id. The
provider is this module's, not the global one, so a process (or a test) can configure, flush and reset it.
Span names and attributes follow the OpenTelemetry semantic conventions (HTTP server spans, GenAI client spans
``chat {model}`` with ``gen_ai.*`` attributes, ``invoke_agent {name}``, ``execute_tool {name}``); Switchyard adds
``switchyard.*`` attributes (chip-µs, replica, tenant, run) and ``workflow_node {id}`` spans.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

__all__ = [
    "PROVIDER",
    "configure_tracing",
    "current_trace_id",
    "enabled",
    "flush_tracing",
    "shutdown_tracing",
    "trace_id_of",
    "tracer",
]

log = logging.getLogger(__name__)

_provider: TracerProvider | None = None
_tracer: trace.Tracer = trace.NoOpTracer()
INSTRUMENTATION = "switchyard"
PROVIDER = "switchyard"
"""``gen_ai.provider.name`` of Switchyard's model calls and agents."""


def traces_url(endpoint: str) -> str:
    """OTLP/HTTP's traces URL for ``endpoint``: a base URL gets ``/v1/traces`` (as OTEL_EXPORTER_OTLP_ENDPOINT)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"


def configure_tracing(
    endpoint: str, *, service: str, exporter: SpanExporter | None = None, headers: Mapping[str, str] | None = None
) -> bool:
    """Export this process's spans to the OTLP/HTTP collector at ``endpoint`` (or to ``exporter``); with neither,
    trace nothing. Returns whether spans are now recorded. A provider configured before is flushed first."""
    global _provider, _tracer
    shutdown_tracing()
    if exporter is None:
        if not endpoint:
            return False
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # headers: OTEL_EXPORTER_OTLP_HEADERS (a collector's credentials) unless given here
        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), headers=dict(headers) if headers else None)
    resource = Resource.create(
        {"service.name": service, "service.instance.id": f"{socket.gethostname()}:{os.getpid()}"}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    _provider = provider
    _tracer = provider.get_tracer(INSTRUMENTATION)
    return True


def shutdown_tracing() -> None:
    """Export what is buffered and stop tracing (a no-op when nothing is configured)."""
    global _provider, _tracer
    provider, _provider = _provider, None
    _tracer = trace.NoOpTracer()
    if provider is not None:
        try:
            provider.shutdown()
        except Exception:  # an unreachable collector must not fail a shutdown
            log.warning("could not export the last spans", exc_info=True)


def flush_tracing(timeout_ms: int = 30_000) -> bool:
    """Export the spans ended so far now (True when they were, or there is nothing to export)."""
    return _provider.force_flush(timeout_ms) if _provider is not None else True


def tracer() -> trace.Tracer:
    """The process's tracer (no-op unless :func:`configure_tracing` set an exporter)."""
    return _tracer


def enabled() -> bool:
    """Whether spans are recorded and exported."""
    return _provider is not None


def trace_id_of(span: trace.Span) -> str | None:
    """``span``'s trace id as 32 hex digits (W3C), or None for a non-recording span."""
    context = span.get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def current_trace_id() -> str | None:
    """The trace id of the current span, if one is being recorded."""
    return trace_id_of(trace.get_current_span())
