"""Text completion objects and stream chunks exactly in OpenAI's shape, plus Switchyard's ``usage.compute``.

A choice's logprobs are OpenAI's legacy form: parallel lists of its ``tokens``, their ``token_logprobs``, each one's
``top_logprobs`` as a ``{token: logprob}`` map and its ``text_offset`` in the choice's text.
"""

from __future__ import annotations

from typing import Any

from switchyard.accelerator.pool import ComputeReceipt, TextDelta, TokenLogprob

__all__ = ["ChoiceText", "combined_usage", "text_chunk", "text_completion_object", "wire_finish_reason"]

_FINISH_REASONS = frozenset({"stop", "length", "content_filter"})


def wire_finish_reason(finish_reason: str) -> str:
    """The pool's finish reason as this API spells it: ``stop``, ``length`` or ``content_filter`` (a text completion
    calls no tools, and a cancelled one reaches no client)."""
    return finish_reason if finish_reason in _FINISH_REASONS else "stop"


def _logprobs(tokens: list[TokenLogprob], offset: int) -> dict[str, Any]:
    offsets: list[int] = []
    for token in tokens:
        offsets.append(offset)
        offset += len(token.token)
    return {
        "tokens": [t.token for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": [{top.token: top.logprob for top in t.top_logprobs} for t in tokens],
        "text_offset": offsets,
    }


class ChoiceText:
    """One choice's text and token logprobs, gathered from its deltas (a refusal's text is its text: this API has
    no refusal field)."""

    def __init__(self, index: int, logprobs: bool) -> None:
        self.index = index
        self.with_logprobs = logprobs
        self.parts: list[str] = []
        self.tokens: list[TokenLogprob] = []
        self.length = 0
        self.finish_reason: str | None = None

    def add(self, delta: TextDelta) -> str:
        """Take ``delta``; returns the text it adds."""
        text = delta.refusal or delta.text
        self.parts.append(text)
        self.tokens += delta.logprobs
        self.length += len(text)
        return text

    def chunk_choice(self, delta: TextDelta) -> dict[str, Any]:
        """The streamed choice of one delta, its logprobs (with ``logprobs``) placed in the whole text."""
        start, first_token = self.length, len(self.tokens)
        text = self.add(delta)
        logprobs = _logprobs(self.tokens[first_token:], start) if self.with_logprobs else None
        return {"index": self.index, "text": text, "logprobs": logprobs, "finish_reason": None}

    def ending(self, finish_reason: str) -> dict[str, Any]:
        """The streamed choice that ends it."""
        self.finish_reason = finish_reason
        logprobs = _logprobs([], self.length) if self.with_logprobs else None
        return {"index": self.index, "text": "", "logprobs": logprobs, "finish_reason": finish_reason}

    def wire(self) -> dict[str, Any]:
        """The choice of a whole answer."""
        logprobs = _logprobs(self.tokens, 0) if self.with_logprobs else None
        text = "".join(self.parts)
        return {"index": self.index, "text": text, "logprobs": logprobs, "finish_reason": self.finish_reason}


def combined_usage(receipts: list[ComputeReceipt]) -> dict[str, Any]:
    """The usage of every choice: tokens and chip-microseconds added up, the timings of the slowest choice."""
    if len(receipts) == 1:
        return receipts[0].usage()
    usages = [receipt.usage() for receipt in receipts]
    prompt = sum(u["prompt_tokens"] for u in usages)
    completion = sum(u["completion_tokens"] for u in usages)
    computes = [u["compute"] for u in usages]
    replicas = sorted({c["replica"] for c in computes})
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)},
        "compute": {
            "chip_us": sum(c["chip_us"] for c in computes),
            "instance_type": computes[0]["instance_type"],
            "replica": ",".join(replicas),
            "queue_ms": max(c["queue_ms"] for c in computes),
            "ttft_ms": max(c["ttft_ms"] for c in computes),
            "decode_ms": max(c["decode_ms"] for c in computes),
        },
    }


def text_completion_object(
    *, completion_id: str, created: int, model: str, choices: list[ChoiceText], receipts: list[ComputeReceipt]
) -> dict[str, Any]:
    """The ``text_completion`` of finished choices."""
    return {
        "id": completion_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "system_fingerprint": "switchyard",
        "choices": [choice.wire() for choice in choices],
        "usage": combined_usage(receipts),
    }


def text_chunk(
    completion_id: str, created: int, model: str, choice: dict[str, Any] | None, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One streamed ``text_completion`` chunk: one choice's piece, or (``choice`` ``None``) the usage."""
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "system_fingerprint": "switchyard",
        "choices": [] if choice is None else [choice],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk
