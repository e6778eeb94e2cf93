"""What the pool takes (InferenceRequest) and what it streams back (deltas, then one ComputeReceipt)."""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """One output token of text."""

    text: str


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


PoolEvent = TextDelta | ToolCallDelta | ComputeReceipt

KEPT_RECEIPTS = 100_000
"""How many issued receipts a backend keeps until they are taken (``take_receipts``); past that the oldest go."""
