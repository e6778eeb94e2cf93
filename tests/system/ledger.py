"""What the clients saw, attempt by attempt: the record the oracle checks the books against.

Every HTTP attempt any client makes goes through :class:`Balancer`, an ``httpx`` transport that plays a load
balancer without health checks (round robin over the API processes) and gives each attempt an ``x-request-id``
of its own (for the logs).
It records the attempt's API port, status, duration, bytes, whether ``data: [DONE]`` went by, and the
completion id the server chose (from the first bytes of the answer: a completion that never sent any has none).
"""

from __future__ import annotations

import contextvars
import itertools
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

__all__ = ["Attempt", "Balancer", "Ledger", "Request", "current_request"]

DONE = b"data: [DONE]"
COMPLETION_ID = re.compile(rb'"id":\s*"(chatcmpl-[^"]+)"')
HEAD_BYTES = 4096


@dataclass
class Attempt:
    """One HTTP exchange (a client's retry is a new attempt)."""

    id: str  # the x-request-id sent
    port: int
    method: str
    path: str
    request: Request | None
    started: float
    ended: float | None = None
    status: int | None = None
    error: str | None = None
    bytes: int = 0
    done: bool = False  # `data: [DONE]` was received
    killed: bool = False  # open on an API process when it was SIGKILLed
    completion_id: str | None = None  # the server's id of the completion, once bytes carrying it arrived

    @property
    def duration_s(self) -> float:
        return (self.ended if self.ended is not None else time.monotonic()) - self.started


@dataclass
class Request:
    """One logical operation of the workload (a chat completion, a run step of the client, a key operation),
    with the attempts it took and how it ended."""

    kind: str
    detail: dict[str, Any]
    started: float
    attempts: list[Attempt] = field(default_factory=list)
    ended: float | None = None
    answered: Attempt | None = None  # the attempt that got the complete answer
    outcome: str = "pending"  # "answered", or what the client finally saw
    chip_us: int | None = None  # from the answer (usage.compute.chip_us)


current_request: contextvars.ContextVar[Request | None] = contextvars.ContextVar("current_request", default=None)


class Ledger:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.attempts: list[Attempt] = []
        self.requests: list[Request] = []
        self._ids = itertools.count(1)

    def next_id(self) -> str:
        return f"sys-{self.tag}-{next(self._ids):06d}"

    def begin(self, kind: str, **detail: Any) -> Request:
        request = Request(kind, detail, time.monotonic())
        self.requests.append(request)
        return request

    def dump(self, path: Path) -> None:
        """Every operation and its attempts, one JSON object a line (kept with the logs for a post-mortem)."""
        with path.open("w") as out:
            for request in self.requests:
                row = {
                    "kind": request.kind,
                    "detail": request.detail,
                    "outcome": request.outcome,
                    "answered": request.answered.id if request.answered else None,
                    "chip_us": request.chip_us,
                    "attempts": [
                        {k: v for k, v in vars(a).items() if k != "request"} | {"duration_s": round(a.duration_s, 3)}
                        for a in request.attempts
                    ],
                }
                out.write(json.dumps(row, default=str) + "\n")

    def open_streams(self, port: int) -> list[Attempt]:
        """Chat completion streams in flight on ``port`` that already received bytes."""
        return [
            a
            for a in self.attempts
            if a.port == port and a.ended is None and a.bytes > 0 and a.path.endswith("/chat/completions")
        ]

    def mark_killed(self, port: int) -> list[Attempt]:
        """Mark the attempts open on ``port`` (its API process was just SIGKILLed)."""
        hit = [a for a in self.attempts if a.port == port and a.ended is None]
        for attempt in hit:
            attempt.killed = True
        return hit


class _Recorded(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, attempt: Attempt) -> None:
        self._inner = inner
        self._attempt = attempt
        self._tail = b""
        self._head = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                self._attempt.bytes += len(chunk)
                if self._attempt.completion_id is None and len(self._head) < HEAD_BYTES:
                    self._head += chunk
                    found = COMPLETION_ID.search(self._head)
                    if found:
                        self._attempt.completion_id = found.group(1).decode()
                window = self._tail + chunk
                if DONE in window:
                    self._attempt.done = True
                self._tail = window[-len(DONE) :]
                yield chunk
        except BaseException as exc:
            self._attempt.error = self._attempt.error or f"{type(exc).__name__}: {exc}"
            raise

    async def aclose(self) -> None:
        if self._attempt.ended is None:
            self._attempt.ended = time.monotonic()
        await self._inner.aclose()


class Balancer(httpx.AsyncBaseTransport):
    """Round robin over ``ports`` (all on 127.0.0.1), one fresh ``x-request-id`` per attempt, all recorded."""

    def __init__(self, ports: list[int], ledger: Ledger) -> None:
        self.ports = ports
        self.ledger = ledger
        self._next = itertools.count()
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        port = self.ports[next(self._next) % len(self.ports)]
        request.url = request.url.copy_with(host="127.0.0.1", port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        logical = current_request.get()
        attempt = Attempt(
            self.ledger.next_id(), port, request.method, request.url.path, logical, started=time.monotonic()
        )
        request.headers["x-request-id"] = attempt.id
        self.ledger.attempts.append(attempt)
        if logical is not None:
            logical.attempts.append(attempt)
        try:
            response = await self._inner.handle_async_request(request)
        except BaseException as exc:
            attempt.error = f"{type(exc).__name__}: {exc}"
            attempt.ended = time.monotonic()
            raise
        attempt.status = response.status_code
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Recorded(response.stream, attempt),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
