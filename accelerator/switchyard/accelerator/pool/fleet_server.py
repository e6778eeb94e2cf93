"""The fleet process's HTTP face: simulated deployments served to gateways as real Neuron servers would be.

``FleetServer`` is an ASGI app over an ``AcceleratorPool`` of ``SimulatedDeployment``s (``switchyard fleet``
serves it; ``RemoteSimulatedDeployment`` is its client):

- ``POST /v1/chat/completions``: an OpenAI chat completion, streamed as SSE or whole, with the request's
  identity in a ``switchyard`` field (``request_id``, ``tenant``, ``priority``, ``weight``, ``session``); the
  answer's ``usage.compute`` is the exact compute receipt (chip-µs, instance type, replica, queue/TTFT/decode ms).
  With ``logprobs: true`` each text chunk (or the whole answer) carries its tokens' ``logprobs`` in OpenAI's shape.
- ``POST /v1/embeddings``: an OpenAI embedding call (float vectors) with the same ``switchyard`` identity; its
  ``usage.compute`` is the receipt of the call's prefill-only passes.
- ``POST /v1/requests/{request_id}/cancel``: stop a request; its stream still ends with the receipt of what it used.
- ``GET /v1/fleet``: every deployment's replicas, queue depth, utilisation and KV use. ``GET /healthz``.
- ``POST /v1/fleet/reload``: serve the deployments ``reload`` returns (the fleet file, re-read); requests already
  running finish on the old ones.

Every receipt the fleet issues is kept for ``take_receipts`` (the fleet process records them): a gateway that
dies before it has committed a receipt as usage leaves one the books can name. When a gateway's connection drops
the request is stopped. Requests run under ids of the fleet's own, so a request repeated under the same id (an
agent step retried after its worker froze) runs beside the first. When ``token`` is set every request must carry
``Authorization: Bearer <token>``.

One loop serves every tenant, so no request holds it: bodies over ``LOOP_JSON_BYTES`` are read, and long whole
answers and large embedding answers written, in a thread; a stream gives the loop away every ``EVENTS_PER_TURN``
events; the deployments work out the sim model's answers in threads (``sim_backend``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from switchyard.accelerator.errors import SimulatorError, UnknownNameError
from switchyard.accelerator.pool.embeddings import EmbeddingRequest
from switchyard.accelerator.pool.heap import freeze_startup_heap, thaw_startup_heap
from switchyard.accelerator.pool.pool import AcceleratorPool, Backend
from switchyard.accelerator.pool.types import (
    ComputeReceipt,
    InferenceRequest,
    IssuedReceipts,
    Priority,
    TextDelta,
    ToolCallDelta,
)

__all__ = ["FleetServer"]

_Request = TypeVar("_Request", InferenceRequest, EmbeddingRequest)

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_CANCEL = re.compile(r"^/v1/requests/(?P<request_id>[^/]+)/cancel$")
MAX_BODY_BYTES = 16 * 1024 * 1024
LOOP_JSON_BYTES = 64 * 1024  # JSON this large or smaller is read and written on the event loop; larger, in a thread
EVENTS_PER_TURN = 64  # a stream gives the loop to other requests after this many events


class FleetServer:
    def __init__(
        self,
        pool: AcceleratorPool,
        *,
        token: str = "",
        reload: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.pool = pool
        self._reload = reload
        self._token = token.encode()
        self._running: dict[str, tuple[str, Backend]] = {}  # by the fleet's own id: (the caller's id, backend)
        self._serial = itertools.count(1)
        self._issued = IssuedReceipts(keep=True)
        self._closing = False

    def close(self) -> None:
        """Take no more requests and stop those running: each stream still ends with its receipt (shutdown)."""
        self._closing = True
        for own_id, (_request_id, backend) in list(self._running.items()):
            backend.cancel(own_id)

    def take_receipts(self) -> list[tuple[ComputeReceipt, float]]:
        """Every receipt issued since the last call, under the callers' request ids, with epoch times."""
        return self._issued.take()

    async def replace_pool(self, pool: AcceleratorPool) -> AcceleratorPool:
        """Serve from ``pool``; returns the old pool, closed, once its last running request has finished."""
        old, self.pool = self.pool, pool
        retired = set(old.backends())
        # reloads are rare: polling keeps bookkeeping off every request's path
        while any(backend in retired for _id, backend in self._running.values()):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await old.aclose()
        return old

    def in_flight(self) -> int:
        return len(self._running)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/healthz":
            await _json(send, 200, {"status": "ok", "in_flight": len(self._running)})
            return
        if self._token and not self._authorized(scope):
            await _error(send, 401, "a valid fleet token is required", "invalid_token")
            return
        if method == "POST" and path == "/v1/chat/completions":
            await self._complete(scope, receive, send)
        elif method == "POST" and path == "/v1/embeddings":
            await self._embed(receive, send)
        elif method == "POST" and (match := _CANCEL.match(path)):
            running = [(own, b) for own, (rid, b) in list(self._running.items()) if rid == match["request_id"]]
            for own_id, backend in running:
                backend.cancel(own_id)
            await _json(send, 200, {"cancelled": bool(running)})
        elif method == "GET" and path == "/v1/fleet":
            await _json(send, 200, {"deployments": await self.pool.status()})
        elif method == "POST" and path == "/v1/fleet/reload" and self._reload is not None:
            try:
                await self._reload()
            except SimulatorError as exc:
                await _error(send, 400, f"fleet file rejected, nothing changed: {exc}", "invalid_fleet")
                return
            await _json(send, 200, {"deployments": await self.pool.status()})
        else:
            await _error(send, 404, f"no route {method} {path}", "not_found")

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                return hmac.compare_digest(value, b"Bearer " + self._token)
        return False

    async def _accept(
        self, receive: Receive, send: Send, parse: Callable[[dict[str, Any]], _Request]
    ) -> tuple[_Request, Backend] | None:
        """The request and the deployment it is for, or ``None`` once it was refused (404, 400, 503 at shutdown)."""
        try:
            request = parse(await _loads(await _body(receive)))
            backend = self.pool.backend(request.model)
        except UnknownNameError as exc:
            await _error(send, 404, str(exc), "model_not_found")
            return None
        except (ValueError, KeyError, TypeError) as exc:
            await _error(send, 400, f"invalid request: {exc}", "invalid_request")
            return None
        if self._closing:
            await _error(send, 503, "the fleet process is shutting down", "fleet_shutting_down")
            return None
        return request, backend

    @contextlib.asynccontextmanager
    async def _running_as_own(
        self, request_id: str, backend: Backend, receive: Receive
    ) -> AsyncIterator[tuple[str, asyncio.Event]]:
        """Run a request under an id of this process's own (``rid~n``), stopped when its gateway goes away:
        yields that id and the event set when the gateway is gone."""
        own_id = f"{request_id}~{next(self._serial)}"
        self._running[own_id] = (request_id, backend)
        gone = asyncio.Event()
        watcher = asyncio.get_running_loop().create_task(self._watch(receive, gone, backend, own_id))
        try:
            yield own_id, gone
        finally:
            watcher.cancel()
            self._running.pop(own_id, None)

    async def _complete(self, scope: Scope, receive: Receive, send: Send) -> None:
        accepted = await self._accept(receive, send, _inference_request)
        if accepted is None:
            return
        request, backend = accepted
        receipt: ComputeReceipt | None = None
        async with self._running_as_own(request.request_id, backend, receive) as (own_id, gone):
            stream = _ChunkWriter(send, request.model, gone) if request.stream else _WholeWriter(send, request.model)
            await stream.start()
            events = 0
            async for event in backend.generate(replace(request, request_id=own_id)):
                if isinstance(event, ComputeReceipt):
                    receipt = replace(event, request_id=request.request_id)
                    self._issued.add(receipt)
                else:
                    await stream.delta(event)
                events += 1
                if events % EVENTS_PER_TURN == 0:  # a long answer streamed at once must not hold the loop
                    await asyncio.sleep(0)
            assert receipt is not None
            await stream.finish(receipt)
            if gone.is_set():
                log.warning("request %s: its gateway went away (%d chip-us)", request.request_id, receipt.chip_us)

    async def _embed(self, receive: Receive, send: Send) -> None:
        accepted = await self._accept(receive, send, _embedding_request)
        if accepted is None:
            return
        request, backend = accepted
        vectors: tuple[tuple[float, ...], ...] = ()
        receipt: ComputeReceipt | None = None
        async with self._running_as_own(request.request_id, backend, receive) as (own_id, _gone):
            async for event in backend.embed(replace(request, request_id=own_id)):
                if isinstance(event, ComputeReceipt):
                    receipt = replace(event, request_id=request.request_id)
                    self._issued.add(receipt)
                else:
                    vectors = event.vectors
            assert receipt is not None
            data = [{"object": "embedding", "index": i, "embedding": list(v)} for i, v in enumerate(vectors)]
            answer = {"object": "list", "data": data, "model": request.model, "usage": receipt.usage()}
            with contextlib.suppress(OSError):  # the gateway is gone: the watcher has seen it
                await _json(send, 200, answer, large=sum(len(v) for v in vectors) > LOOP_JSON_BYTES // 32)

    @staticmethod
    async def _watch(receive: Receive, gone: asyncio.Event, backend: Backend, own_id: str) -> None:
        """Stop the request when its gateway disconnects (its process died or it gave up)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        backend.cancel(own_id)


class _ChunkWriter:
    """OpenAI ``chat.completion.chunk`` SSE; writes nothing once the gateway is gone."""

    def __init__(self, send: Send, model: str, gone: asyncio.Event) -> None:
        self._send = send
        self._gone = gone
        self._base = {"id": "", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    async def _write(self, payload: dict[str, Any] | str, more: bool = True) -> None:
        if self._gone.is_set():
            return
        data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        try:
            await self._send({"type": "http.response.body", "body": f"data: {data}\n\n".encode(), "more_body": more})
        except OSError:
            self._gone.set()

    async def start(self) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        await self._write(self._chunk({"role": "assistant", "content": ""}))

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**self._base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    async def delta(self, event: TextDelta | ToolCallDelta) -> None:
        if isinstance(event, TextDelta):
            chunk = self._chunk({"content": event.text})
            if event.logprobs:
                chunk["choices"][0]["logprobs"] = {"content": [t.wire() for t in event.logprobs], "refusal": None}
            await self._write(chunk)
            return
        call = event.call
        function = {"name": call.name, "arguments": call.arguments}
        tool_call = {"index": event.index, "id": call.id, "type": "function", "function": function}
        await self._write(self._chunk({"tool_calls": [tool_call]}))

    async def finish(self, receipt: ComputeReceipt) -> None:
        await self._write(self._chunk({}, receipt.finish_reason))
        await self._write({**self._base, "choices": [], "usage": receipt.usage()})
        await self._write("[DONE]", more=False)


class _WholeWriter:
    """One ``chat.completion``, sent when the receipt is in (a whole answer: one write, one read)."""

    def __init__(self, send: Send, model: str) -> None:
        self._send = send
        self._model = model
        self._text: list[str] = []
        self._logprobs: list[dict[str, Any]] = []
        self._calls: list[dict[str, Any]] = []

    async def start(self) -> None:
        pass

    async def delta(self, event: TextDelta | ToolCallDelta) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
            self._logprobs += [t.wire() for t in event.logprobs]
        else:
            function = {"name": event.call.name, "arguments": event.call.arguments}
            self._calls.append({"id": event.call.id, "type": "function", "function": function})

    async def finish(self, receipt: ComputeReceipt) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._calls:
            message["tool_calls"] = self._calls
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": receipt.finish_reason}
        if self._logprobs:
            choice["logprobs"] = {"content": self._logprobs, "refusal": None}
        completion = {"object": "chat.completion", "model": self._model, "choices": [choice], "usage": receipt.usage()}
        with contextlib.suppress(OSError):  # the gateway is gone: the watcher has seen it
            await _json(self._send, 200, completion, large=len(self._text) + len(self._logprobs) > EVENTS_PER_TURN)


def _inference_request(body: dict[str, Any]) -> InferenceRequest:
    identity = body["switchyard"]
    return InferenceRequest(
        request_id=str(identity["request_id"]),
        tenant=str(identity["tenant"]),
        model=str(body["model"]),
        messages=list(body["messages"]),
        tools=list(body.get("tools") or ()),
        tool_choice=body.get("tool_choice"),
        max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
        output_ceiling=identity.get("output_ceiling"),  # the most the caller's budget hold covers
        seed=body.get("seed"),
        priority=Priority(int(identity.get("priority", Priority.STANDARD))),
        weight=float(identity.get("weight", 1.0)),
        session=identity.get("session"),
        stream=bool(body.get("stream", False)),
        response_format=body.get("response_format"),
        stop=(stop,) if isinstance(stop := body.get("stop"), str) else tuple(stop or ()),
        ignore_eos=body.get("ignore_eos") is True,
        min_tokens=min_tokens if isinstance(min_tokens := body.get("min_tokens"), int) else None,
        parameters={key: value for key, value in body.items() if key not in ("model", "messages", "switchyard")},
    )


def _embedding_request(body: dict[str, Any]) -> EmbeddingRequest:
    identity = body["switchyard"]
    inputs = body["input"]
    return EmbeddingRequest(
        request_id=str(identity["request_id"]),
        tenant=str(identity["tenant"]),
        model=str(body["model"]),
        inputs=tuple(item if isinstance(item, str) else tuple(int(t) for t in item) for item in inputs),
        dimensions=body.get("dimensions"),
        priority=Priority(int(identity.get("priority", Priority.STANDARD))),
        weight=float(identity.get("weight", 1.0)),
        user=body.get("user"),
    )


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ValueError("the client went away before sending its request")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ValueError(f"request body larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _loads(body: bytes) -> Any:
    """A request body's JSON, read in a thread when it is large (up to ``MAX_BODY_BYTES``: a tenth of a second)."""
    return json.loads(body) if len(body) <= LOOP_JSON_BYTES else await asyncio.to_thread(json.loads, body)


async def _json(send: Send, status: int, payload: dict[str, Any], *, large: bool = False) -> None:
    """Answer ``payload`` as JSON; ``large``: serialised in a thread (a long answer with logprobs is megabytes)."""
    body = (await asyncio.to_thread(json.dumps, payload) if large else json.dumps(payload)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, status: int, message: str, code: str) -> None:
    await _json(send, status, {"error": {"message": message, "type": "fleet_error", "param": None, "code": code}})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            freeze_startup_heap()  # full collections then walk only what requests allocate (a schema bomb's dicts)
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            thaw_startup_heap()
            await send({"type": "lifespan.shutdown.complete"})
            return
