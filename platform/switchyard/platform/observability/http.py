"""Observing an HTTP process: ``GET /metrics``, a server span and a latency sample per request, and (at debug
level) an access record per request.

:class:`ObservedApp` wraps a whole ASGI app, so it sees every request (routing errors and refusals by the
authentication middleware included) and the end of streamed answers. :class:`Observability` is the Litestar
plugin of the API: it wraps the app's handler at startup, configures tracing from ``SWITCHYARD_OTLP_ENDPOINT``
and JSON logs. The fleet process wraps its own app with :func:`observe_fleet`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from litestar import Litestar
from litestar.config.app import AppConfig
from litestar.plugins import InitPluginProtocol
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from sqlalchemy import func, select
from sqlmodel import col

from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.http.server_timing import start_stage_clock
from switchyard.platform.observability.logs import bind_http_scope, logging_config, unbind_http_scope
from switchyard.platform.observability.metrics import CONTENT_TYPE_LATEST, HTTP_REQUEST_SECONDS, Snapshot, exposition
from switchyard.platform.observability.tracing import (
    configure_tracing,
    shutdown_tracing,
    trace_id_of,
    tracer,
)
from switchyard.platform.observability.tracing import enabled as tracing_enabled

__all__ = ["TRACE_ID_HEADER", "Observability", "ObservedApp", "api_snapshot", "observe_fleet"]

TRACE_ID_HEADER = "x-trace-id"
access_log = logging.getLogger("switchyard.access")

ASGIApp = Callable[..., Awaitable[None]]
SnapshotSource = Callable[[], Awaitable[Snapshot]]


def litestar_route(scope: MutableMapping[str, Any]) -> str:
    """The route template Litestar matched (``/v1/threads/{thread_id}/runs``), or ``unmatched``."""
    return str(scope.get("path_template") or "unmatched")


class ObservedApp:
    """``app`` with ``GET /metrics`` answered before it, and every other HTTP request measured and traced."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        snapshot: SnapshotSource | None = None,
        route: Callable[[MutableMapping[str, Any]], str] = litestar_route,
    ) -> None:
        self.app = app
        self.snapshot = snapshot
        self.route = route

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/metrics" and scope["method"] in ("GET", "HEAD"):
            await self._metrics(scope, send)
            return
        if not tracing_enabled():
            await self._observe(scope, receive, send, None)
            return
        context = propagate.extract(_Headers(scope))  # the caller's traceparent, if any
        with tracer().start_as_current_span(scope["method"], context=context, kind=SpanKind.SERVER) as span:
            await self._observe(scope, receive, send, span)

    async def _observe(self, scope: Any, receive: Any, send: Any, span: trace.Span | None) -> None:
        started = time.perf_counter()
        method = scope["method"]
        status = 500  # unless a response starts
        trace_id = trace_id_of(span) if span is not None else None
        clock = start_stage_clock()

        async def observed_send(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [*message.get("headers", ())]
                if clock.stages:  # the request reached a stage: its time, stage by stage
                    clock.mark("respond")
                    headers.append((b"server-timing", clock.header()))
                if trace_id is not None:
                    headers.append((b"x-trace-id", trace_id.encode()))
                message["headers"] = headers
            await send(message)

        log_token = bind_http_scope(scope)
        try:
            await self.app(scope, receive, observed_send)
        finally:
            route = self.route(scope)
            elapsed = time.perf_counter() - started
            HTTP_REQUEST_SECONDS.labels(method, route, str(status)).observe(elapsed)
            if span is not None and span.is_recording():
                _end_server_span(span, scope, method, route, status)
            if access_log.isEnabledFor(logging.DEBUG):  # at info a record per request would cost what a request does
                access_log.debug(
                    "%s %s %s",
                    method,
                    route,
                    status,
                    extra={"http_method": method, "route": route, "status": status, "duration_ms": elapsed * 1e3},
                )
            unbind_http_scope(log_token)

    async def _metrics(self, scope: MutableMapping[str, Any], send: Any) -> None:
        snapshot = await self.snapshot() if self.snapshot is not None else None
        body = exposition(snapshot)
        headers = [(b"content-type", CONTENT_TYPE_LATEST.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


def _end_server_span(span: trace.Span, scope: MutableMapping[str, Any], method: str, route: str, status: int) -> None:
    span.update_name(f"{method} {route}")
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "http.route": route,
        "url.path": scope.get("path", ""),
        "http.response.status_code": status,
        "switchyard.request_id": request_id_of(scope),
    }
    principal = scope.get("user")
    tenant_id = getattr(getattr(principal, "scope", None), "tenant_id", None)
    if tenant_id:
        attributes["switchyard.tenant_id"] = tenant_id
    key_id = getattr(principal, "key_id", None)
    if key_id:
        attributes["switchyard.key_id"] = key_id
    span.set_attributes(attributes)
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR))


class _Headers:
    """An ASGI scope's headers as the mapping OpenTelemetry's propagators read (``traceparent``)."""

    def __init__(self, scope: MutableMapping[str, Any]) -> None:
        self._headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}

    def get(self, key: str, default: Any = None) -> Any:
        value = self._headers.get(key.lower())
        return [value] if value is not None else default

    def keys(self) -> list[str]:
        return list(self._headers)


async def api_snapshot(app: Litestar) -> Snapshot:
    """What an API process reports at scrape time: the deployments it simulates itself (none when a fleet process
    runs them: that process reports them) and the usage events not yet rated."""
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import UsageEvent

    state = app.state
    snapshot = Snapshot()
    gateway = getattr(state, "gateway", None)
    if gateway is not None and not state.settings.fleet_url:
        snapshot.pools = await gateway.status()
    database = getattr(state, "database", None)
    if database is not None:
        async with database.unit_of_work(UNSCOPED) as session:
            pending = select(func.count()).select_from(UsageEvent).where(col(UsageEvent.status) == "pending")
            snapshot.unrated_usage_events = int((await session.execute(pending)).scalar_one())
    return snapshot


class Observability(InitPluginProtocol):
    """The API's metrics, traces and JSON logs (see the module docstring)."""

    def __init__(self, *, log_level: str, otlp_endpoint: str = "", service: str = "switchyard-api") -> None:
        self.log_level = log_level
        self.otlp_endpoint = otlp_endpoint
        self.service = service

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.logging_config = logging_config(self.log_level)
        app_config.on_startup.append(self._start)
        app_config.on_shutdown.append(self._stop)
        return app_config

    def _start(self, app: Litestar) -> None:
        configure_tracing(self.otlp_endpoint, service=self.service)
        if not isinstance(app.asgi_handler, ObservedApp):
            app.asgi_handler = ObservedApp(app.asgi_handler, snapshot=lambda: api_snapshot(app))

    def _stop(self, app: Litestar) -> None:
        shutdown_tracing()


_FLEET_IDS = re.compile(r"^/v1/requests/[^/]+")


def fleet_route(scope: MutableMapping[str, Any]) -> str:
    """The fleet server's paths with request ids folded (``/v1/requests/{request_id}/cancel``)."""
    return _FLEET_IDS.sub("/v1/requests/{request_id}", str(scope.get("path", "")))


def observe_fleet(app: Any, *, otlp_endpoint: str = "", log_level: str = "info") -> ObservedApp:
    """The fleet process's app with ``/metrics`` (its deployments' queues, replicas and KV cache), a span per
    request and JSON logs."""
    from switchyard.platform.observability.logs import configure_process_logging

    configure_process_logging(log_level)
    configure_tracing(otlp_endpoint, service="switchyard-fleet")

    async def snapshot() -> Snapshot:
        return Snapshot(pools=await app.pool.status())

    return ObservedApp(app, snapshot=snapshot, route=fleet_route)
