"""Chat completion objects and stream chunks exactly in OpenAI's shape, plus Switchyard's ``usage.compute``."""

from __future__ import annotations

import json
from typing import Any

from switchyard.accelerator.pool import ComputeReceipt, ToolCall

__all__ = ["completion_object", "compute_headers", "sse"]


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def completion_object(
    *, completion_id: str, created: int, model: str, text: str, receipt: ComputeReceipt
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if receipt.tool_calls:
        message["tool_calls"] = [_tool_call(c) for c in receipt.tool_calls]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": "switchyard",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": receipt.finish_reason}],
        "usage": receipt.usage(),
    }


def chunk(completion_id: str, created: int, model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": "switchyard",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def tool_call_deltas(index: int, call: ToolCall) -> list[dict[str, Any]]:
    """A tool call as OpenAI streams it: id and name first, then the arguments."""
    head = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
    body = {"index": index, "function": {"arguments": call.arguments}}
    return [{"tool_calls": [head]}, {"tool_calls": [body]}]


def sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def compute_headers(receipt: ComputeReceipt) -> dict[str, str]:
    return {"x-switchyard-chip-us": str(receipt.chip_us), "x-switchyard-instance-type": receipt.instance_type}
