"""Chat completion objects and stream chunks exactly in OpenAI's shape, plus Switchyard's ``usage.compute``."""

from __future__ import annotations

import json
from typing import Any

from switchyard.accelerator.pool import ComputeReceipt, TextDelta, TokenLogprob, ToolCall

__all__ = ["AnswerText", "choice_logprobs", "completion_object", "compute_headers", "sse"]


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


class AnswerText:
    """The text, refusal and token logprobs of a whole answer, gathered from its deltas."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.text_logprobs: list[TokenLogprob] = []
        self.refusal_logprobs: list[TokenLogprob] = []

    def add(self, delta: TextDelta) -> None:
        if delta.refusal:
            self.refusal.append(delta.refusal)
            self.refusal_logprobs += delta.logprobs
        else:
            self.text.append(delta.text)
            self.text_logprobs += delta.logprobs


def choice_logprobs(content: list[TokenLogprob], refusal: list[TokenLogprob]) -> dict[str, Any]:
    """OpenAI's ``ChoiceLogprobs``: a list for the part that has tokens, ``null`` for one that has none (an answer
    of tool calls alone has neither)."""
    return {
        "content": [t.wire() for t in content] if content else None,
        "refusal": [t.wire() for t in refusal] if refusal else None,
    }


def completion_object(
    *, completion_id: str, created: int, model: str, answer: AnswerText, receipt: ComputeReceipt, logprobs: bool
) -> dict[str, Any]:
    """The ``chat.completion`` of a finished answer; with ``logprobs`` its tokens' logprobs."""
    refusal = "".join(answer.refusal) or None
    message: dict[str, Any] = {"role": "assistant", "content": "".join(answer.text) or None, "refusal": refusal}
    if receipt.tool_calls:
        message["tool_calls"] = [_tool_call(c) for c in receipt.tool_calls]
    choice_logprob = choice_logprobs(answer.text_logprobs, answer.refusal_logprobs) if logprobs else None
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": "switchyard",
        "choices": [
            {"index": 0, "message": message, "logprobs": choice_logprob, "finish_reason": receipt.finish_reason}
        ],
        "usage": receipt.usage(),
    }


def chunk(
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish: str | None,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": "switchyard",
        "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
    }


def text_chunk(completion_id: str, created: int, model: str, event: TextDelta, logprobs: bool) -> dict[str, Any]:
    """The chunk of one text or refusal delta; with ``logprobs`` the logprobs of the tokens it holds."""
    delta = {"refusal": event.refusal} if event.refusal else {"content": event.text}
    if not logprobs:
        return chunk(completion_id, created, model, delta, None)
    tokens = list(event.logprobs)
    by_part = choice_logprobs([], tokens) if event.refusal else choice_logprobs(tokens, [])
    if not event.refusal and not tokens:
        by_part["content"] = []
    return chunk(completion_id, created, model, delta, None, by_part)


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
