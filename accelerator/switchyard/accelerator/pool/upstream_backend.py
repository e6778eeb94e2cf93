"""The ``openai-compatible`` backend: a real upstream (vLLM on Neuron, TGI, ...) over httpx.

One pooled client per deployment; connect errors are retried (the request never reached the upstream), nothing
else is. Compute is the wall time of the upstream call × the chips the operator declared for the deployment.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_aiohttp import AiohttpTransport

from switchyard.accelerator.pool.fleet import DeploymentSpec
from switchyard.accelerator.pool.tokens import count_prompt_tokens, count_tokens
from switchyard.accelerator.pool.types import (
    ComputeReceipt,
    InferenceRequest,
    PoolEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)

__all__ = ["UpstreamDeployment", "UpstreamError"]

CONNECT_RETRIES = 2
ESTIMATE_OVERHEAD_S = 0.5  # admission estimate: fixed latency plus a generous time per output token
ESTIMATE_S_PER_TOKEN = 0.05


class UpstreamError(RuntimeError):
    """The upstream failed or answered with an error."""

    def __init__(self, message: str, status_code: int = 502) -> None:
        super().__init__(message)
        self.status_code = status_code


class UpstreamDeployment:
    def __init__(self, spec: DeploymentSpec, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.spec = spec
        self._cancelled: dict[str, asyncio.Event] = {}
        headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
        self._client = httpx.AsyncClient(
            base_url=spec.base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(spec.timeout_s, connect=5.0),
            # httpx's API on aiohttp's connection pool: several times the throughput of httpx's own transport.
            transport=transport or AiohttpTransport(limits=limits),
        )

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
        """A bound for budget reservations: the upstream's time is unknown until it answers."""
        seconds = min(self.spec.timeout_s, ESTIMATE_OVERHEAD_S + output_tokens * ESTIMATE_S_PER_TOKEN)
        return round(seconds * 1e6) * self.spec.chips

    async def aclose(self) -> None:
        await self._client.aclose()

    def _body(self, request: InferenceRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.spec.upstream_model or self.spec.name,
            "messages": list(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = list(request.tools)
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.seed is not None:
            body["seed"] = request.seed
        return body

    async def _open(self, body: dict[str, Any]) -> httpx.Response:
        for attempt in range(CONNECT_RETRIES + 1):
            try:
                response = await self._client.send(
                    self._client.build_request("POST", "/chat/completions", json=body), stream=True
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # the request never left
                if attempt == CONNECT_RETRIES:
                    raise UpstreamError(f"upstream {self.spec.base_url} unreachable: {exc}") from exc
                await asyncio.sleep(0.05 * 2**attempt)
                continue
            if response.status_code >= 400:
                detail = (await response.aread()).decode(errors="replace")[:500]
                await response.aclose()
                raise UpstreamError(f"upstream answered {response.status_code}: {detail}")
            return response
        raise AssertionError("unreachable")

    async def generate(self, request: InferenceRequest) -> AsyncIterator[PoolEvent]:
        started = time.monotonic()
        first_token_at: float | None = None
        text_tokens = 0
        usage: dict[str, Any] = {}
        finish_reason = "stop"
        calls: dict[int, dict[str, str]] = {}
        response = await self._open(self._body(request))
        cancelled = self._cancelled.setdefault(request.request_id, asyncio.Event())
        try:
            async for line in response.aiter_lines():
                if cancelled.is_set():
                    finish_reason = "cancelled"
                    break
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    if first_token_at is None and (delta.get("content") or delta.get("tool_calls")):
                        first_token_at = time.monotonic()
                    if delta.get("content"):
                        text_tokens += count_tokens(delta["content"])
                        yield TextDelta(delta["content"])
                    for call in delta.get("tool_calls") or ():
                        slot = calls.setdefault(int(call.get("index", 0)), {"id": "", "name": "", "arguments": ""})
                        slot["id"] = call.get("id") or slot["id"]
                        function = call.get("function") or {}
                        slot["name"] = function.get("name") or slot["name"]
                        slot["arguments"] += function.get("arguments") or ""
                    finish_reason = choice.get("finish_reason") or finish_reason
        finally:
            self._cancelled.pop(request.request_id, None)
            await response.aclose()
        finished = time.monotonic()
        tool_calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items()))
        for index, call in enumerate(tool_calls):
            yield ToolCallDelta(index, call)
        first = first_token_at or finished
        yield ComputeReceipt(
            tenant=request.tenant,
            request_id=request.request_id,
            model=self.spec.name,
            instance_type=self.spec.instance,
            replica=f"{self.spec.name}/upstream",
            chip_us=round((finished - started) * 1e6) * self.spec.chips,
            prompt_tokens=int(usage.get("prompt_tokens") or count_prompt_tokens(request.messages, request.tools)),
            completion_tokens=int(usage.get("completion_tokens") or text_tokens),
            queue_ms=0.0,
            ttft_ms=(first - started) * 1e3,
            decode_ms=(finished - first) * 1e3,
            finish_reason=finish_reason,
            tool_calls=tool_calls,
        )

    def status(self) -> dict[str, Any]:
        return {
            "model": self.spec.name,
            "backend": "openai-compatible",
            "base_url": self.spec.base_url,
            "instance_type": self.spec.instance,
            "chips": self.spec.chips,
            "replicas": [],
        }
