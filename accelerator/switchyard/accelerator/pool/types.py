"""What the pool takes (InferenceRequest) and what it streams back (deltas, then one ComputeReceipt)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

__all__ = [
    "KEPT_RECEIPTS",
    "ComputeReceipt",
    "InferenceRequest",
    "PoolEvent",
    "Priority",
    "TextDelta",
    "TokenLogprob",
    "ToolCall",
    "ToolCallDelta",
]


class Priority(IntEnum):
    """Priority tiers: a higher tier is always dispatched before a lower one when the fleet is saturated."""

    BATCH = 0
    STANDARD = 1
    INTERACTIVE = 2


@dataclass(frozen=True, slots=True)
class InferenceRequest:
    """One chat completion to run on the fleet (messages and tools in OpenAI's JSON shape)."""

    request_id: str
    tenant: str
    model: str
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] = ()
    tool_choice: Any = None
    max_tokens: int | None = None
    seed: int | None = None
    priority: Priority = Priority.STANDARD
    weight: float = 1.0
    session: str | None = None
    stream: bool = True  # False: the caller wants the whole answer; an upstream may send it in one piece
    response_format: Mapping[str, Any] | None = None  # OpenAI's: {"type": "json_object"}, {"type": "json_schema", ...}
    stop: tuple[str, ...] = ()  # the answer ends before the first of these
    ignore_eos: bool = False
    """vLLM's sampling extension: the model does not stop on its own, so a text answer is exactly ``max_tokens``
    long (what benchmark clients send to force lengths); without ``max_tokens`` it has no effect."""
    min_tokens: int | None = None
    """vLLM's sampling extension: a text answer is at least this long (unless ``max_tokens`` or the output
    ceiling is lower: they cut it)."""
    parameters: Mapping[str, Any] | None = None
    """The client's OpenAI parameters besides ``model`` and ``messages``, exactly as it sent them: an
    ``openai-compatible`` upstream receives these instead of the fields above (``None`` for requests Switchyard
    composes itself, whose fields above are sent)."""
    trace_context: tuple[tuple[str, str], ...] = ()
    """W3C trace-context headers (``traceparent``) of the model call's span, sent on by a remote deployment."""
    output_ceiling: int | None = None
    """The most output tokens the answer may have, text, refusal and tool-call arguments together, whatever the
    request asks: the ``max_tokens`` admission held a budget for (the client's, else the platform's maximum). A
    backend cuts the answer there (``finish_reason: "length"``); unlike ``max_tokens`` it is never a length to
    aim for. ``None``: no ceiling but ``max_tokens``."""
    compute_ceiling_chip_us: int | None = None
    """The most compute the answer may bill (what its budget hold covers): a backend that bills measured time (an
    ``openai-compatible`` upstream's wall time × chips) stops the answer when it reaches this, ``finish_reason:
    "length"``, and bills no more; a simulated one never passes it (its hold is its batch-1 bound). ``None``: the
    call holds no budget, no ceiling."""

    @property
    def most_output_tokens(self) -> int | None:
        """Where the answer is cut: the lower of ``max_tokens`` and ``output_ceiling`` (``None``: neither is set)."""
        bounds = [bound for bound in (self.max_tokens, self.output_ceiling) if bound is not None]
        return min(bounds) if bounds else None

    @property
    def top_logprobs(self) -> int | None:
        """How many alternatives each output token's logprobs list when the client asked for logprobs
        (``logprobs: true`` in ``parameters``, with ``top_logprobs``, default 0), else ``None``."""
        if not self.parameters or self.parameters.get("logprobs") is not True:
            return None
        return int(self.parameters.get("top_logprobs") or 0)


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One output token's log probability, in OpenAI's shape: the token, its logprob (<= 0), its UTF-8 bytes
    (``None`` when it has no byte form), and the most likely tokens at its position (``top_logprobs``, themselves
    without alternatives)."""

    token: str
    logprob: float
    bytes: tuple[int, ...] | None
    top_logprobs: tuple[TokenLogprob, ...] = ()

    def wire(self) -> dict[str, Any]:
        """OpenAI's ``ChatCompletionTokenLogprob`` JSON."""
        return {**self.wire_alternative(), "top_logprobs": [top.wire_alternative() for top in self.top_logprobs]}

    def wire_alternative(self) -> dict[str, Any]:
        """OpenAI's ``TopLogprob`` JSON (no alternatives of its own)."""
        return {"token": self.token, "logprob": self.logprob, "bytes": None if self.bytes is None else list(self.bytes)}

    @classmethod
    def from_wire(cls, value: Mapping[str, Any]) -> TokenLogprob:
        """Read OpenAI's JSON of one token's logprob (raises ``KeyError``/``TypeError``/``ValueError`` when it is
        not that)."""
        raw = value.get("bytes")
        tops = tuple(cls.from_wire(top) for top in value.get("top_logprobs") or ())
        return cls(str(value["token"]), float(value["logprob"]), None if raw is None else tuple(raw), tops)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Output text as it is generated: the simulator sends one token per delta, an upstream what each chunk holds.

    ``logprobs`` are the log probabilities of the tokens this delta holds, when the client asked for them. A delta
    with ``refusal`` holds text of the model's refusal (OpenAI's ``refusal`` field) and no ``text``; its
    ``logprobs`` are the refusal's tokens'."""

    text: str
    logprobs: tuple[TokenLogprob, ...] = ()
    refusal: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A whole tool call (the simulator emits each call in one piece)."""

    index: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ComputeReceipt:
    """The compute one request used: chip-microseconds attributed to it exactly, and its timings."""

    tenant: str
    request_id: str
    model: str
    instance_type: str
    replica: str
    chip_us: int
    prompt_tokens: int
    completion_tokens: int
    queue_ms: float
    ttft_ms: float
    decode_ms: float
    finish_reason: str
    tool_calls: tuple[ToolCall, ...] = field(default=())
    cached_tokens: int = 0
    """Prompt tokens the serving replica read from its prefix cache instead of computing them (part of
    ``prompt_tokens``; their cost, the iteration time spent reading them, is in ``chip_us``); an upstream's own
    count when it reports one, else 0."""
    cache_saved_chip_us: int = 0
    """What computing the cached tokens would have cost beyond reading them (the simulator's estimate from its
    linear prefill rate, which errs low; 0 when nothing was cached or an upstream does not say). Not billed:
    ``chip_us`` is what the request cost."""

    def usage(self) -> dict[str, Any]:
        """OpenAI's ``usage`` object with Switchyard's ``compute``: this receipt on the wire."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            "compute": {
                "chip_us": self.chip_us,
                "instance_type": self.instance_type,
                "replica": self.replica,
                "queue_ms": round(self.queue_ms, 3),
                "ttft_ms": round(self.ttft_ms, 3),
                "decode_ms": round(self.decode_ms, 3),
                "cache_saved_chip_us": self.cache_saved_chip_us,
            },
        }


PoolEvent = TextDelta | ToolCallDelta | ComputeReceipt

KEPT_RECEIPTS = 100_000
"""How many issued receipts a backend keeps until they are taken (``take_receipts``); past that the oldest go."""


class IssuedReceipts:
    """The receipts a backend issued, for the process's recorder: kept from the first ``take`` on (a backend
    nobody takes from keeps nothing), at most ``KEPT_RECEIPTS`` of them."""

    def __init__(self, *, keep: bool = False) -> None:
        self._kept: deque[tuple[ComputeReceipt, float]] | None = deque(maxlen=KEPT_RECEIPTS) if keep else None

    def add(self, receipt: ComputeReceipt) -> None:
        if self._kept is not None:
            self._kept.append((receipt, time.time()))

    def take(self) -> list[tuple[ComputeReceipt, float]]:
        """Every receipt issued since the last call, with the wall time (epoch seconds) it was issued."""
        if self._kept is None:
            self._kept = deque(maxlen=KEPT_RECEIPTS)
        taken = list(self._kept)
        self._kept.clear()
        return taken
