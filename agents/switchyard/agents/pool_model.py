"""A :class:`~switchyard.agents.model.Model` on the accelerator pool: one model call = one pool request.

The step id becomes the pool request id, so a model call repeated after a crash carries the same id (the
platform can use it to keep one usage event per step). The receipt's chip-µs and token counts are what the
run loop bills on the step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from switchyard.accelerator.pool import (
    ComputeReceipt,
    InferenceRequest,
    PoolEvent,
    Priority,
    TextDelta,
    ToolCallDelta,
    count_tokens,
)
from switchyard.agents.messages import Message, ToolCall, Usage
from switchyard.agents.model import ModelRequest, ModelResponse

__all__ = ["PoolLike", "PoolModel", "pool_token_counter"]

#: The token counter matching the pool's own prompt accounting.
pool_token_counter: Callable[[str], int] = count_tokens


class PoolLike(Protocol):
    """The part of ``AcceleratorPool`` this adapter uses."""

    def submit(self, request: InferenceRequest) -> AsyncIterator[PoolEvent]: ...


def _upstream_parameters(request: ModelRequest) -> dict[str, Any]:
    """What an ``openai-compatible`` upstream receives besides ``model`` and ``messages``: the call's tools,
    sampling parameters and options, as a client would send them."""
    body = request.to_openai()
    del body["model"], body["messages"]
    return body


class PoolModel:
    """Calls the pool for ``tenant``; ``on_event`` sees every streamed event (for SSE message deltas)."""

    def __init__(
        self,
        pool: PoolLike,
        *,
        tenant: str,
        priority: Priority = Priority.STANDARD,
        session: str | None = None,
        on_event: Callable[[PoolEvent], None] | None = None,
    ) -> None:
        self._pool = pool
        self._tenant = tenant
        self._priority = priority
        self._session = session
        self._on_event = on_event
        self.receipts: list[ComputeReceipt] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        inference = InferenceRequest(
            request_id=request.request_id,
            tenant=self._tenant,
            model=request.model,
            messages=[m.to_openai() for m in request.messages],
            tools=list(request.tools),
            max_tokens=request.params.max_tokens,
            seed=request.params.seed,
            priority=self._priority,
            session=self._session,
            tool_choice=request.options.get("tool_choice"),
            response_format=request.options.get("response_format"),
            stop=tuple(request.params.stop or ()),
            ignore_eos=bool(request.params.ignore_eos),
            parameters=_upstream_parameters(request),
            output_ceiling=request.output_ceiling,
            compute_ceiling_chip_us=request.compute_ceiling_chip_us,
        )
        text: list[str] = []
        refusal: list[str] = []
        calls: dict[int, ToolCall] = {}
        receipt: ComputeReceipt | None = None
        async for event in self._pool.submit(inference):
            if self._on_event is not None:
                self._on_event(event)
            if isinstance(event, TextDelta):
                text.append(event.text)
                refusal.append(event.refusal)
            elif isinstance(event, ToolCallDelta):
                calls[event.index] = ToolCall(id=event.call.id, name=event.call.name, arguments=event.call.arguments)
            elif isinstance(event, ComputeReceipt):
                receipt = event
        if receipt is None:
            raise RuntimeError(f"the pool sent no compute receipt for {request.request_id!r}")
        self.receipts.append(receipt)
        # a model's refusal (an upstream's `refusal`) is the answer when it said nothing else
        refused = not "".join(text) and bool("".join(refusal))
        content = "".join(refusal if refused else text) or None
        message = Message(
            role="assistant", content=content, tool_calls=tuple(calls[i] for i in sorted(calls)), refusal=refused
        )
        return ModelResponse(
            message=message,
            usage=Usage(
                input_tokens=receipt.prompt_tokens,
                output_tokens=receipt.completion_tokens,
                cached_input_tokens=receipt.cached_tokens,
            ),
            chip_us=receipt.chip_us,
            cache_saved_chip_us=receipt.cache_saved_chip_us,
            finish_reason=receipt.finish_reason,
            receipt_id=receipt.request_id,
            ttft_ms=round(receipt.ttft_ms, 3),
            replica=receipt.replica,
        )
