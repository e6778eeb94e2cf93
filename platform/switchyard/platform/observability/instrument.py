"""Instrumentation applied where things are built: the pool's model calls, admission, agent runs and tools.

Each wrapper records metrics and a span and otherwise changes nothing: same events, same results, same errors.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from prometheus_client import Counter

from switchyard.accelerator.pool import AcceleratorPool, ComputeReceipt, EmbeddingRequest, InferenceRequest
from switchyard.agents import ToolRegistry
from switchyard.agents.tools.base import RetrySemantics, Tool, ToolContext, ToolDefinition, ToolKind, ToolResult
from switchyard.platform.observability.agent_spans import acting_context
from switchyard.platform.observability.logs import log_context
from switchyard.platform.observability.metrics import (
    ADMISSION_REFUSALS,
    INFERENCE_CHIP_US,
    INFERENCE_TOKENS,
    RUNS,
    TIME_PER_OUTPUT_TOKEN_SECONDS,
    TOOL_CALLS,
    TTFT_SECONDS,
)
from switchyard.platform.observability.tracing import PROVIDER, tracer

__all__ = ["count_refusals", "instrument_pool", "record_receipt", "traced_response", "traced_run", "traced_tools"]

P = ParamSpec("P")
A = TypeVar("A")
R = TypeVar("R", InferenceRequest, EmbeddingRequest)


def record_receipt(receipt: ComputeReceipt, span: Span | None = None) -> None:
    """Latency, token and compute metrics of a finished model call, and its span's GenAI attributes."""
    model = receipt.model
    TTFT_SECONDS.labels(model).observe(receipt.ttft_ms / 1e3)
    if receipt.completion_tokens > 1:
        TIME_PER_OUTPUT_TOKEN_SECONDS.labels(model).observe(receipt.decode_ms / 1e3 / (receipt.completion_tokens - 1))
    INFERENCE_TOKENS.labels(model, "input").inc(receipt.prompt_tokens)
    INFERENCE_TOKENS.labels(model, "output").inc(receipt.completion_tokens)
    INFERENCE_CHIP_US.labels(model, receipt.instance_type).inc(receipt.chip_us)
    if span is not None and span.is_recording():
        span.set_attributes(
            {
                "gen_ai.response.model": model,
                "gen_ai.response.finish_reasons": [receipt.finish_reason],
                "gen_ai.usage.input_tokens": receipt.prompt_tokens,
                "gen_ai.usage.output_tokens": receipt.completion_tokens,
                "switchyard.chip_us": receipt.chip_us,
                "switchyard.replica": receipt.replica,
                "switchyard.instance_type": receipt.instance_type,
                "switchyard.queue_ms": receipt.queue_ms,
                "switchyard.ttft_ms": receipt.ttft_ms,
            }
        )


def _model_call_span(request: InferenceRequest | EmbeddingRequest, operation: str) -> Span:
    # start_span, not start_as_current_span: an async generator may be resumed and closed in other contexts
    span = tracer().start_span(f"{operation} {request.model}", kind=SpanKind.CLIENT)
    if span.is_recording():
        span.set_attributes(
            {
                "gen_ai.operation.name": operation,
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.request.model": request.model,
                "switchyard.request_id": request.request_id,
                "switchyard.tenant_id": request.tenant,
            }
        )
        max_tokens = getattr(request, "max_tokens", None)
        if max_tokens is not None:
            span.set_attribute("gen_ai.request.max_tokens", max_tokens)
    return span


def _with_trace_context(request: R, span: Span) -> R:
    """``request`` carrying ``span``'s W3C trace context (``traceparent``), which a remote deployment sends on."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return dataclasses.replace(request, trace_context=tuple(carrier.items())) if carrier else request


def _call(call: Callable[[R], AsyncIterator[Any]], request: R, span: Span) -> AsyncIterator[Any]:
    """``call(request)``: refused at once (an unknown model) as without the span, which then ends as failed."""
    try:
        return call(request)
    except BaseException as exc:
        _failed(span, exc)
        span.end()
        raise


def _failed(span: Span, exc: BaseException) -> None:
    if span.is_recording():
        span.set_attribute("error.type", type(exc).__name__)
        span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))


async def _observed(events: AsyncIterator[Any], span: Span) -> AsyncIterator[Any]:
    try:
        async for event in events:
            if isinstance(event, ComputeReceipt):
                record_receipt(event, span)
            yield event
    except BaseException as exc:
        _failed(span, exc)
        raise
    finally:
        span.end()


def instrument_pool(pool: AcceleratorPool) -> AcceleratorPool:
    """``pool`` with a span and metrics around each model call (chat and embeddings); the call carries its span's
    trace context, so a fleet process or upstream that traces continues the same trace."""
    submit, embed = pool.submit, pool.embed

    def observed_submit(request: InferenceRequest) -> AsyncIterator[Any]:
        span = _model_call_span(request, "chat")
        return _observed(_call(submit, _with_trace_context(request, span), span), span)

    def observed_embed(request: EmbeddingRequest) -> AsyncIterator[Any]:
        span = _model_call_span(request, "embeddings")
        return _observed(_call(embed, _with_trace_context(request, span), span), span)

    # instance attributes shadow the methods: only this pool is observed, the class is untouched
    pool.__dict__["submit"] = observed_submit
    pool.__dict__["embed"] = observed_embed
    return pool


def count_refusals(admission: A) -> A:
    """``admission`` (an ``Admission``) counting each refused model call by its error code, whether admitted now or
    ahead of its job (only this instance is changed)."""
    for name in ("admit", "admit_ahead"):
        admission.__dict__[name] = _counting(getattr(admission, name))
    return admission


def _counting(admit: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(admit)
    async def counted(call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await admit(call, *args, **kwargs)
        except Exception as exc:
            code = getattr(exc, "code", None)  # API errors carry one; a database error is no refusal
            if code:
                caller = "request" if getattr(call, "agent_id", None) is None else "run"
                ADMISSION_REFUSALS.labels(str(code), caller).inc()
            raise

    return counted


def _traced(
    execute: Callable[P, Awaitable[str]], *, id_field: str, counted: Counter | None
) -> Callable[P, Awaitable[str]]:
    """``execute(env, *, tenant_id, <id_field>)`` in a span ``invoke_agent``, its id in the logs written
    meanwhile, and its outcome counted (in ``counted``, when given)."""

    @functools.wraps(execute)
    async def traced(*args: P.args, **kwargs: P.kwargs) -> str:
        owner_id, tenant_id = str(kwargs.get(id_field, "")), str(kwargs.get("tenant_id", ""))
        with (
            tracer().start_as_current_span("invoke_agent", kind=SpanKind.INTERNAL) as span,
            log_context(**{id_field: owner_id}, tenant_id=tenant_id),
        ):
            if span.is_recording():
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.provider.name": PROVIDER,
                        f"switchyard.{id_field}": owner_id,
                        "switchyard.tenant_id": tenant_id,
                    }
                )
            outcome = await execute(*args, **kwargs)
            span.set_attribute("switchyard.outcome" if counted is None else "switchyard.run_outcome", outcome)
        if counted is not None:
            counted.labels(outcome).inc()
        return outcome

    return traced


def traced_run(execute: Callable[P, Awaitable[str]]) -> Callable[P, Awaitable[str]]:
    """Decorates ``execute_run(env, *, tenant_id, run_id)``: a span ``invoke_agent``, the run's id in the logs
    written meanwhile, and the outcome counted."""
    return _traced(execute, id_field="run_id", counted=RUNS)


def traced_response(execute: Callable[P, Awaitable[str]]) -> Callable[P, Awaitable[str]]:
    """Decorates ``execute_response(env, *, tenant_id, response_id)``: a span ``invoke_agent`` with the response's
    id (its model and tool calls are spans under it), the response's id in the logs written meanwhile."""
    return _traced(execute, id_field="response_id", counted=None)


class _TracedTool:
    """A tool whose calls are spans ``execute_tool {name}`` (children of the span of the agent calling it, in a
    drive traced by :func:`~switchyard.platform.observability.agent_spans.drive_traced`) and are counted."""

    def __init__(self, tool: Tool) -> None:
        self._tool = tool

    @property
    def definition(self) -> ToolDefinition:
        return self._tool.definition

    @property
    def kind(self) -> ToolKind:
        return self._tool.kind

    @property
    def requires_approval(self) -> bool:
        return self._tool.requires_approval

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return self._tool.retry_semantics(arguments)

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        name = self._tool.definition.name
        kind = str(getattr(self._tool.kind, "value", self._tool.kind))
        parent = acting_context()  # None: the current span's child
        with tracer().start_as_current_span(f"execute_tool {name}", context=parent, kind=SpanKind.INTERNAL) as span:
            if span.is_recording():
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": name,
                        "gen_ai.tool.type": kind,
                        "gen_ai.tool.call.id": context.call_id,
                        "switchyard.run_id": context.run_id,
                    }
                )
            started = time.perf_counter()
            try:
                result = await self._tool.call(arguments, context)
            except Exception:
                TOOL_CALLS.labels(kind, "error").inc()
                raise
            TOOL_CALLS.labels(kind, "error" if result.is_error else "ok").inc()
            if span.is_recording():
                span.set_attribute("switchyard.tool_ms", (time.perf_counter() - started) * 1e3)
                if result.is_error:
                    span.set_status(Status(StatusCode.ERROR))
            return result


def traced_tools(registry: ToolRegistry) -> ToolRegistry:
    """A registry of ``registry``'s tools, each call traced and counted."""
    return ToolRegistry(_TracedTool(tool) for tool in registry)
