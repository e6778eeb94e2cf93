"""Response and conversation objects exactly as OpenAI spells them, plus Switchyard's ``usage.compute``."""

from __future__ import annotations

from typing import Any

from switchyard.agents import RunState, RunStatus, StepType
from switchyard.agents.tools.secrets import redact_tool
from switchyard.platform.models import Conversation, ResponseRecord

__all__ = ["STATUS", "conversation_object", "response_object", "response_status"]

STATUS = {
    RunStatus.QUEUED: "queued",
    RunStatus.IN_PROGRESS: "in_progress",
    RunStatus.REQUIRES_ACTION: "completed",  # the output holds the client's function calls or approval requests
    RunStatus.COMPLETED: "completed",
    RunStatus.INCOMPLETE: "incomplete",
    RunStatus.FAILED: "failed",
    RunStatus.CANCELLED: "cancelled",
    RunStatus.EXPIRED: "cancelled",
}
FINISHED = frozenset({"completed", "incomplete", "failed", "cancelled"})
_INCOMPLETE_REASONS = {"max_tokens": "max_output_tokens", "timeout": "timeout", "max_steps": "max_tool_calls"}


def _last_model_finish(state: RunState) -> str | None:
    steps = [s for s in state.steps if s.type is StepType.MODEL_CALL and s.usage is not None]
    return steps[-1].finish_reason if steps else None


def response_status(state: RunState) -> tuple[str, dict[str, str] | None]:
    """The response's status and ``incomplete_details``: an answer cut at ``max_output_tokens`` is incomplete."""
    status = STATUS[state.status]
    if state.status is RunStatus.INCOMPLETE:
        reason = state.incomplete_reason or "max_tool_calls"
        return status, {"reason": _INCOMPLETE_REASONS.get(reason, reason)}
    if status == "completed" and _last_model_finish(state) == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    return status, None


def _or(value: Any, default: Any) -> Any:
    """What the request set, else OpenAI's default (``null`` is not a value these fields take)."""
    return default if value is None else value


def _seconds(row: ResponseRecord) -> int:
    return int(row.created_at.timestamp())


def response_object(
    row: ResponseRecord, state: RunState | None = None, output: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The response as ``GET /v1/responses/{id}`` answers it (``state`` and ``output`` when fresher than the
    row's)."""
    state = state or RunState.model_validate(row.state)
    status, incomplete = response_status(state)
    echo = row.request.get("echo", {})
    usage = None
    if status in FINISHED or state.usage.total_tokens:
        usage = {
            "input_tokens": state.usage.input_tokens,
            "input_tokens_details": {"cached_tokens": state.usage.cached_input_tokens, "cache_write_tokens": 0},
            "output_tokens": state.usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": state.usage.total_tokens,
            "compute": {
                "chip_us": state.chip_us,
                "instance_type": row.request.get("instance_type"),
                "model_calls": sum(1 for s in state.steps if s.type is StepType.MODEL_CALL and s.usage is not None),
            },
        }
    error = None
    if state.status is RunStatus.FAILED and state.last_error is not None:
        error = {"code": state.last_error.code, "message": state.last_error.message}
    return {
        "id": row.id,
        "object": "response",
        "created_at": _seconds(row),
        "status": status,
        "background": row.background,
        "completed_at": state.completed_at_ms // 1000 if state.completed_at_ms and status in FINISHED else None,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": echo.get("instructions"),
        "max_output_tokens": echo.get("max_output_tokens"),
        "max_tool_calls": echo.get("max_tool_calls"),
        "model": row.model,
        "output": row.output if output is None else output,
        "parallel_tool_calls": _or(echo.get("parallel_tool_calls"), True),
        "previous_response_id": row.previous_response_id,
        "conversation": {"id": row.conversation_id} if row.conversation_id else None,
        "prompt": echo.get("prompt"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": row.stored,
        "temperature": _or(echo.get("temperature"), 1.0),
        "text": echo.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": echo.get("tool_choice") or "auto",
        "tools": [redact_tool(tool) for tool in echo.get("tools") or []],  # stored redacted; older rows too
        "top_logprobs": echo.get("top_logprobs"),
        "top_p": _or(echo.get("top_p"), 1.0),
        "truncation": echo.get("truncation") or "disabled",
        "usage": usage,
        "user": echo.get("user"),
        "metadata": echo.get("metadata") or {},
    }


def conversation_object(row: Conversation) -> dict[str, Any]:
    return {
        "id": row.id,
        "object": "conversation",
        "created_at": int(row.created_at.timestamp()),
        "metadata": row.metadata_json,
    }
