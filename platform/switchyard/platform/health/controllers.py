"""Liveness (``/healthz``) and readiness (``/readyz``: database and broker reachable)."""

from __future__ import annotations

import asyncio
from typing import Any

from kombu.connection import Connection
from litestar import Request, Response, get

from switchyard.platform.auth import access
from switchyard.platform.health.schemas import Readiness
from switchyard.platform.http.errors import ServiceUnavailable, error_response
from switchyard.platform.http.openapi import answers

__all__ = ["healthz", "readyz"]


@get("/healthz", opt=access("public"), exclude_from_auth=True, tags=["Health"], summary="Liveness")
async def healthz() -> dict[str, str]:
    """The process is up and serving."""
    return {"status": "ok"}


def _broker_reachable(url: str) -> None:
    with Connection(url, connect_timeout=2) as connection:
        connection.ensure_connection(max_retries=1, timeout=2)


@get(
    "/readyz",
    opt=access("public"),
    exclude_from_auth=True,
    tags=["Health"],
    summary="Readiness",
    raises=[ServiceUnavailable],
    responses=answers(200, "The database and the broker answer.", {"application/json": Readiness}),
)
async def readyz(request: Request[Any, Any, Any]) -> Response[Any]:
    """The database and the Celery broker answer; 503 names the one that does not."""
    state = request.app.state
    try:
        await state.database.ping()
    except Exception as exc:
        return error_response(503, f"database unreachable: {type(exc).__name__}", code="database_unreachable")
    try:
        await asyncio.wait_for(asyncio.to_thread(_broker_reachable, state.settings.broker_url), timeout=5)
    except Exception as exc:
        return error_response(503, f"broker unreachable: {type(exc).__name__}", code="broker_unreachable")
    return Response({"status": "ready", "database": "ok", "broker": "ok"})
