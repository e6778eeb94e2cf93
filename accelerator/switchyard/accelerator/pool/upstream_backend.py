"""The ``openai-compatible`` backend: a real upstream (vLLM on Neuron, TGI, ...) over httpx.

One pooled client per deployment; connect errors are retried (the request never reached the upstream), nothing
else is. Compute is the wall time of the upstream call × the chips the operator declared for the deployment.
The answer's text, refusal and logprobs are passed on as the upstream sent them (a streamed answer chunk by chunk).

An answer never has more output tokens than the request's ``most_output_tokens`` (what admission held a budget
for): the upstream is asked for at most that many (``max_tokens``, when the client set no bound itself and the
platform's cap, not the context window, is the bound), and what it sends is counted as it arrives, text, refusal
and tool-call arguments alike (``tokens.split_tokens``); an upstream that goes on past the bound is cut there,
mid-chunk if need be, the answer ends with ``finish_reason: "length"`` and the connection is closed, which stops
the upstream's generation.

Nor does an answer bill more compute than the request's ``compute_ceiling_chip_us`` (what its budget hold covers,
by the estimate of ``max_chip_us``): an upstream slower than that estimate is stopped when the call's wall time ×
chips reaches the ceiling, at the first token if it comes later, the same way (``length``, connection closed), and
the receipt bills the ceiling at most.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_aiohttp import AiohttpTransport

from switchyard.accelerator.pool.embeddings import EmbeddingRequest, Embeddings, input_tokens
from switchyard.accelerator.pool.fleet import DeploymentSpec
from switchyard.accelerator.pool.tokens import count_prompt_tokens, split_tokens
from switchyard.accelerator.pool.types import (
    ComputeReceipt,
    InferenceRequest,
    IssuedReceipts,
    PoolEvent,
    TextDelta,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
)

__all__ = ["UpstreamDeployment", "UpstreamError", "reported_cached_tokens", "upstream_cache_key"]

CONNECT_RETRIES = 2
ESTIMATE_OVERHEAD_S = 0.5  # admission estimate: fixed latency plus a generous time per prompt and output token
ESTIMATE_S_PER_PROMPT_TOKEN = 0.001  # 1,000 prompt tokens a second: a held call is stopped past its estimate, so
ESTIMATE_S_PER_TOKEN = 0.05  # a long prompt or a big embedding call must not be stopped before it could answer


class UpstreamError(RuntimeError):
    """The upstream failed or answered with an error; ``retryable`` when it could not be reached or went away (a
    refused connection, a connection dropped mid-answer, a 5xx or 429 answer): the same call may succeed later."""

    def __init__(self, message: str, status_code: int = 502, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retryable = retryable


_GONE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""Transport errors of an upstream that is not there (restarting, refusing): not of one that is slow."""


class UpstreamDeployment:
    _asks_for_ceiling = True  # an upstream treats max_tokens as a bound: it is asked for the ceiling as one

    def __init__(self, spec: DeploymentSpec, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.spec = spec
        self._cancelled: dict[str, asyncio.Event] = {}
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
        # httpx's request/response types on aiohttp's connection pool: several times the throughput of httpx's
        # own transport. Requests go to the transport directly: an AsyncClient would add cookie persistence
        # (never wanted between tenants), redirect and auth machinery and URL merging to every call.
        self._transport = transport or AiohttpTransport(limits=limits)
        self._url = httpx.URL(spec.base_url.rstrip("/") + "/chat/completions")
        self._embeddings_url = httpx.URL(spec.base_url.rstrip("/") + "/embeddings")
        self._headers = {"content-type": "application/json"}
        if spec.api_key:
            self._headers["authorization"] = f"Bearer {spec.api_key}"
        self._timeout = httpx.Timeout(spec.timeout_s, connect=5.0).as_dict()
        self._busy_chip_us = 0
        self._issued = IssuedReceipts()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def context_window(self) -> int:
        return self.spec.context_window

    def cancel(self, request_id: str) -> None:
        """Stop reading a request's answer (its client went away); the upstream connection is closed."""
        event = self._cancelled.get(request_id)
        if event is not None:
            event.set()

    def max_chip_us(self, prompt_tokens: int, output_tokens: int) -> int:
        """A bound for budget reservations: the upstream's time is unknown until it answers. A held call is
        stopped when it reaches it (``compute_ceiling_chip_us``)."""
        estimate_s = (
            ESTIMATE_OVERHEAD_S + prompt_tokens * ESTIMATE_S_PER_PROMPT_TOKEN + output_tokens * ESTIMATE_S_PER_TOKEN
        )
        return round(min(self.spec.timeout_s, estimate_s) * 1e6) * self.spec.chips

    async def aclose(self) -> None:
        await self._transport.aclose()

    def busy_chip_us(self) -> dict[str, tuple[str, int]]:
        """Compute of every answer this process received since start (``{replica: (instance type, chip-µs)}``):
        an upstream's busy time is what the gateway measured of it, the sum of its receipts."""
        return {f"{self.spec.name}/upstream": (self.spec.instance, self._busy_chip_us)}

    def take_receipts(self) -> list[tuple[ComputeReceipt, float]]:
        return self._issued.take()

    def _record(self, receipt: ComputeReceipt) -> None:
        self._busy_chip_us += receipt.chip_us
        self._issued.add(receipt)

    def _body(self, request: InferenceRequest) -> dict[str, Any]:
        """The upstream's request: the client's parameters as it sent them, under the upstream's model name;
        a streamed answer always asks for the usage chunk (compute is metered from it)."""
        body: dict[str, Any] = {"model": self.spec.upstream_model or self.spec.name, "messages": list(request.messages)}
        body |= _parameters(request) if request.parameters is None else request.parameters
        unbounded = body.get("max_tokens") is None and body.get("max_completion_tokens") is None
        if unbounded and self._asks_for_ceiling and self._ceiling_binds(request):
            body["max_tokens"] = request.output_ceiling  # the most its budget hold covers: the upstream stops there
        if request.stream:
            body["stream"] = True
            body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        return body

    def _ceiling_binds(self, request: InferenceRequest) -> bool:
        """Whether the request's ceiling is below what the context window leaves its answer. Only then is it sent
        as ``max_tokens``: the window bounds the answer already, and our prompt count is an estimate, so a
        ``max_tokens`` of the window's whole room could pass the upstream's own (which some refuse with a 400)."""
        ceiling = request.output_ceiling
        if ceiling is None:
            return False
        return ceiling + count_prompt_tokens(request.messages, request.tools) < self.context_window

    async def _open(self, request: InferenceRequest) -> httpx.Response:
        """Send the chat request; its body is read here unless the answer streams."""
        body = json.dumps(self._body(request)).encode()
        return await self._post(self._url, body, read=not request.stream, trace_context=request.trace_context)

    async def _post(
        self, url: httpx.URL, content: bytes, *, read: bool, trace_context: tuple[tuple[str, str], ...] = ()
    ) -> httpx.Response:
        """POST ``content`` (retrying connect errors only: the request never left); an error status is raised as
        :class:`UpstreamError`, and with ``read`` the answer's body is read (and the response closed) here. The
        caller's ``trace_context`` goes along, so an upstream that traces continues the caller's trace."""
        headers = {**self._headers, **dict(trace_context)}
        for attempt in range(CONNECT_RETRIES + 1):
            try:
                response = await self._transport.handle_async_request(
                    httpx.Request("POST", url, headers=headers, content=content, extensions={"timeout": self._timeout})
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # the request never left
                if attempt == CONNECT_RETRIES:
                    raise UpstreamError(f"upstream {self.spec.base_url} unreachable: {exc}", retryable=True) from exc
                await asyncio.sleep(0.05 * 2**attempt)
                continue
            except httpx.HTTPError as exc:  # it left: not retried here (the upstream may be generating)
                gone = isinstance(exc, _GONE)
                raise UpstreamError(f"upstream {self.spec.base_url} failed: {exc!r}", retryable=gone) from exc
            if response.status_code >= 400:
                detail = (await response.aread()).decode(errors="replace")[:500]
                await response.aclose()
                busy = response.status_code >= 500 or response.status_code == 429
                raise UpstreamError(f"upstream answered {response.status_code}: {detail}", retryable=busy)
            if read:
                try:
                    await response.aread()
                except httpx.HTTPError as exc:
                    gone = isinstance(exc, _GONE)
                    message = f"upstream {self.spec.base_url} failed while answering: {exc!r}"
                    raise UpstreamError(message, retryable=gone) from exc
                finally:
                    await response.aclose()
            return response
        raise AssertionError("unreachable")

    async def generate(self, request: InferenceRequest) -> AsyncIterator[PoolEvent]:
        started = time.monotonic()
        answer = _Answer(request.most_output_tokens)
        deadline = self._compute_deadline(request, started)
        try:
            async with asyncio.timeout(_left(deadline)):  # a whole answer comes at once: all of it by then, or none
                response = await self._open(request)
        except TimeoutError:
            answer.stop_at_compute_ceiling()
        else:
            if request.stream:
                async for delta in self._read_stream(request, response, answer, deadline):
                    yield delta
            else:
                for delta in answer.read_completion(response):
                    yield delta
        finished = time.monotonic()
        tool_calls = answer.tool_calls()
        for index, call in enumerate(tool_calls):
            yield ToolCallDelta(index, call)
        receipt = self._receipt(request, answer, started, finished)
        self._record(receipt)
        yield receipt

    def _compute_deadline(self, request: InferenceRequest | EmbeddingRequest, started: float) -> float | None:
        """When (``time.monotonic()``) an answer started at ``started`` reaches its compute ceiling: its compute is
        its wall time × the declared chips. ``None``: no ceiling."""
        if request.compute_ceiling_chip_us is None:
            return None
        return started + request.compute_ceiling_chip_us / self.spec.chips / 1e6

    def _receipt(self, request: InferenceRequest, answer: _Answer, started: float, finished: float) -> ComputeReceipt:
        """The compute of an answer: its wall time × the chips the operator declared, at most its ceiling (the
        answer was stopped there; what passes it is the gateway's own time to close the connection)."""
        first = answer.first_token_at or finished
        usage = answer.usage
        chip_us = round((finished - started) * 1e6) * self.spec.chips
        if request.compute_ceiling_chip_us is not None:
            chip_us = min(chip_us, request.compute_ceiling_chip_us)
        return ComputeReceipt(
            tenant=request.tenant,
            request_id=request.request_id,
            model=self.spec.name,
            instance_type=self.spec.instance,
            replica=f"{self.spec.name}/upstream",
            chip_us=chip_us,
            prompt_tokens=int(usage.get("prompt_tokens") or count_prompt_tokens(request.messages, request.tools)),
            cached_tokens=reported_cached_tokens(usage),
            completion_tokens=answer.completion_tokens(),
            queue_ms=0.0,
            ttft_ms=(first - started) * 1e3,
            decode_ms=(finished - first) * 1e3,
            finish_reason=answer.finish_reason,
            tool_calls=answer.tool_calls(),
        )

    async def _read_stream(
        self, request: InferenceRequest, response: httpx.Response, answer: _Answer, deadline: float | None
    ) -> AsyncIterator[TextDelta]:
        """The answer's deltas as its chunks arrive, until its end, its cut, its cancel or its ``deadline``."""
        cancelled = self._cancelled.setdefault(request.request_id, asyncio.Event())
        lines = response.aiter_lines()
        try:
            while True:
                try:
                    async with asyncio.timeout(_left(deadline)):
                        line = await anext(lines)
                except StopAsyncIteration:
                    break
                except TimeoutError:  # its compute reached the ceiling: closing the connection stops the upstream
                    answer.stop_at_compute_ceiling()
                    break
                except httpx.HTTPError as exc:  # part of the answer went out: not retryable (it would be repeated)
                    raise UpstreamError(f"upstream {self.spec.base_url} failed while answering: {exc!r}") from exc
                if cancelled.is_set():
                    answer.finish_reason = "cancelled"
                    break
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                was_cut = answer.cut
                for delta in answer.read_chunk(json.loads(data)):
                    yield delta
                if answer.cut and not was_cut and not self._read_past_cut(request):
                    break  # closing the connection stops the upstream's generation
        finally:
            self._cancelled.pop(request.request_id, None)
            await response.aclose()

    def _read_past_cut(self, request: InferenceRequest) -> bool:
        """The answer was just cut: whether to read on (dropping what comes). An upstream's answer is not needed
        past the cut, so no (a fleet process sends its compute receipt last, so it stops the request and reads on)."""
        return False

    def _embedding_body(self, request: EmbeddingRequest) -> dict[str, Any]:
        inputs = [item if isinstance(item, str) else list(item) for item in request.inputs]
        body: dict[str, Any] = {"model": self.spec.upstream_model or self.spec.name, "input": inputs}
        body["encoding_format"] = "float"  # the gateway encodes base64 itself when its client asks for it
        if request.dimensions is not None:
            body["dimensions"] = request.dimensions
        if request.user is not None:
            body["user"] = request.user
        return body

    async def embed(self, request: EmbeddingRequest) -> AsyncIterator[Embeddings | ComputeReceipt]:
        """Forward an embedding call to the upstream's ``/embeddings``: its vectors, then the receipt of its wall
        time × the declared chips. Connect errors are retried, nothing else is."""
        started = time.monotonic()
        body = json.dumps(self._embedding_body(request)).encode()
        try:
            async with asyncio.timeout(_left(self._compute_deadline(request, started))):
                response = await self._post(self._embeddings_url, body, read=True, trace_context=request.trace_context)
        except TimeoutError:  # no vectors yet, and none of a part of them is an answer: the call failed, unbilled
            raise UpstreamError(
                f"upstream {self.spec.name} did not answer within the {request.compute_ceiling_chip_us} chip-us "
                "its budget hold covers"
            ) from None
        finished = time.monotonic()
        try:  # in a thread: an answer of many long vectors takes a while to parse, and the loop serves others
            answer, vectors = await asyncio.to_thread(_parse_embeddings, response.content)
        except (ValueError, KeyError, TypeError) as exc:
            raise UpstreamError(f"upstream {self.spec.base_url} sent no embeddings: {exc!r}") from exc
        if len(vectors) != len(request.inputs):
            raise UpstreamError(f"upstream sent {len(vectors)} embeddings for {len(request.inputs)} inputs")
        yield Embeddings(vectors)
        receipt = self._embedding_receipt(request, answer.get("usage") or {}, started, finished)
        self._record(receipt)
        yield receipt

    def _embedding_receipt(
        self, request: EmbeddingRequest, usage: dict[str, Any], started: float, finished: float
    ) -> ComputeReceipt:
        chip_us = round((finished - started) * 1e6) * self.spec.chips
        if request.compute_ceiling_chip_us is not None:  # it answered by then: what passes is our own time
            chip_us = min(chip_us, request.compute_ceiling_chip_us)
        return ComputeReceipt(
            tenant=request.tenant,
            request_id=request.request_id,
            model=self.spec.name,
            instance_type=self.spec.instance,
            replica=f"{self.spec.name}/upstream",
            chip_us=chip_us,
            prompt_tokens=int(usage.get("prompt_tokens") or sum(input_tokens(request.inputs))),
            completion_tokens=0,
            queue_ms=0.0,
            ttft_ms=(finished - started) * 1e3,
            decode_ms=0.0,
            finish_reason="stop",
        )

    async def status(self) -> dict[str, Any]:
        return {
            "model": self.spec.name,
            "backend": "openai-compatible",
            "base_url": self.spec.base_url,
            "instance_type": self.spec.instance,
            "chips": self.spec.chips,
            "replicas": [],
        }


def reported_cached_tokens(usage: dict[str, Any]) -> int:
    """The prompt tokens an upstream says it read from its prefix cache (OpenAI's
    ``usage.prompt_tokens_details.cached_tokens``; vLLM and SGLang report it too), 0 when it does not say."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and cached >= 0 else 0


def _left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (``time.monotonic()``), none below 0; ``None``: no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _parse_embeddings(body: bytes) -> tuple[dict[str, Any], tuple[tuple[float, ...], ...]]:
    """An upstream's embedding list and its vectors in input order."""
    answer = json.loads(body)
    rows = sorted(answer["data"], key=lambda row: int(row["index"]))
    return answer, tuple(tuple(float(x) for x in row["embedding"]) for row in rows)


def _parameters(request: InferenceRequest) -> dict[str, Any]:
    """The parameters of a request Switchyard composed itself (no client's parameters to forward)."""
    parameters: dict[str, Any] = {}
    if request.tools:
        parameters["tools"] = list(request.tools)
    if request.tool_choice is not None:
        parameters["tool_choice"] = request.tool_choice
    if request.max_tokens is not None:
        parameters["max_tokens"] = request.max_tokens
    if request.seed is not None:
        parameters["seed"] = request.seed
    if request.response_format is not None:
        parameters["response_format"] = dict(request.response_format)
    if request.stop:
        parameters["stop"] = list(request.stop)
    if request.session:
        parameters["prompt_cache_key"] = upstream_cache_key(request.tenant, request.session)
    return parameters


def upstream_cache_key(tenant: str, session: str) -> str:
    """The ``prompt_cache_key`` an upstream receives with the requests Switchyard composes for a tenant's session (a
    run's thread, a response's conversation or agent version): OpenAI routes the requests of one key together, so
    an agent's turns find their prefix cached; servers that do not know the field ignore it (vLLM's OpenAI server
    does). Opaque (none of the tenant's ids leaves) and per tenant."""
    return "sy-" + hashlib.sha256(f"{tenant}\x00{session}".encode()).hexdigest()[:32]


class _Answer:
    """What an upstream answered, from SSE chunks or from one non-streamed completion, cut at ``most_tokens``
    output tokens (``None``: never cut).

    Every piece of output, text, refusal or a tool call's arguments, is counted as it arrives; the piece that
    would pass the bound keeps the tokens that fit and the answer is ``cut``: ``finish_reason`` is ``length``
    and nothing more is taken. A piece that fits is passed on exactly as the upstream sent it."""

    def __init__(self, most_tokens: int | None = None) -> None:
        self.first_token_at: float | None = None
        self.output_tokens = 0  # counted as they arrived, cut pieces included
        self.most_tokens = most_tokens
        self.cut = False
        self.usage: dict[str, Any] = {}
        self.finish_reason = "stop"
        self._calls: dict[int, dict[str, str]] = {}

    def completion_tokens(self) -> int:
        """The answer's output tokens: the upstream's count unless the answer was cut (then what was passed on),
        never more than the bound."""
        counted = self.output_tokens if self.cut else int(self.usage.get("completion_tokens") or self.output_tokens)
        return counted if self.most_tokens is None else min(counted, self.most_tokens)

    def _take(self, piece: str) -> tuple[str, int | None]:
        """The part of ``piece`` that fits under the bound, and how many of its tokens were kept when it was
        cut (``None``: all of it was taken, unchanged)."""
        if self.cut:
            return "", 0
        tokens = split_tokens(piece)
        room = None if self.most_tokens is None else self.most_tokens - self.output_tokens
        if room is None or len(tokens) <= room:
            self.output_tokens += len(tokens)
            return piece, None
        self.output_tokens += room
        self.cut = True
        self.finish_reason = "length"
        return "".join(tokens[:room]), room

    def stop_at_compute_ceiling(self) -> None:
        """The answer's compute reached its ceiling: it ends where it is, ``length``, and takes nothing more."""
        self.cut = True
        self.finish_reason = "length"

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(ToolCall(c["id"], c["name"], c["arguments"]) for _, c in sorted(self._calls.items()))

    def _add_call(self, index: int, call: dict[str, Any]) -> None:
        if self.cut:
            return
        slot = self._calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        slot["id"] = call.get("id") or slot["id"]
        function = call.get("function") or {}
        slot["name"] = function.get("name") or slot["name"]
        slot["arguments"] += self._take(function.get("arguments") or "")[0]

    def _deltas(self, content: Any, refusal: Any, logprobs: Any) -> list[TextDelta]:
        """The text and refusal of one chunk (or of a whole answer) with their logprobs, as deltas."""
        deltas: list[TextDelta] = []
        text, kept = self._take(content if isinstance(content, str) else "")
        content_logprobs = _token_logprobs(logprobs, "content")[:kept]
        if text or content_logprobs:
            deltas.append(TextDelta(text, content_logprobs))
        refused, kept = self._take(refusal if isinstance(refusal, str) else "")
        refusal_logprobs = _token_logprobs(logprobs, "refusal")[:kept]
        if refused or refusal_logprobs:
            deltas.append(TextDelta("", refusal_logprobs, refused))
        return deltas

    def read_chunk(self, chunk: dict[str, Any]) -> list[TextDelta]:
        """Take one ``chat.completion.chunk``; returns its text and refusal, if any, with their logprobs."""
        self.usage = chunk.get("usage") or self.usage
        deltas: list[TextDelta] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if self.first_token_at is None and (
                delta.get("content") or delta.get("tool_calls") or delta.get("refusal")
            ):
                self.first_token_at = time.monotonic()
            deltas += self._deltas(delta.get("content"), delta.get("refusal"), choice.get("logprobs"))
            for call in delta.get("tool_calls") or ():
                self._add_call(int(call.get("index", 0)), call)
            if not self.cut:
                self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return deltas

    def read_completion(self, response: httpx.Response) -> list[TextDelta]:
        """Take a whole ``chat.completion`` (nothing of it arrives before the rest: TTFT is its latency); returns
        its text and refusal with their logprobs."""
        self.first_token_at = time.monotonic()
        completion = response.json()
        self.usage = completion.get("usage") or {}
        choice = (completion.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        deltas = self._deltas(message.get("content"), message.get("refusal"), choice.get("logprobs"))
        for index, call in enumerate(message.get("tool_calls") or ()):
            self._add_call(index, call)
        if not self.cut:
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return deltas


def _token_logprobs(logprobs: Any, part: str) -> tuple[TokenLogprob, ...]:
    """The token logprobs of ``part`` (``content`` or ``refusal``) of an upstream's ``logprobs`` object; an entry that
    is not OpenAI's shape fails the answer (passing on something else would be no pass-through)."""
    entries = logprobs.get(part) if isinstance(logprobs, dict) else None
    try:
        return tuple(TokenLogprob.from_wire(entry) for entry in entries or ())
    except (KeyError, TypeError, ValueError) as exc:
        raise UpstreamError(f"upstream sent logprobs not in OpenAI's shape: {exc!r}") from exc
