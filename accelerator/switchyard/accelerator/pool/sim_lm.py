"""The deterministic ``sim`` language model: readable placeholder text and a documented tool-calling policy.

Policy, in order:
1. ``tool_choice`` is ``"none"`` or no tools are offered → text.
2. The last message is a tool result → text that starts by quoting the results it answers
   (``"Result of <name>: <content>"``), so agents see their tools' outputs used.
3. ``tool_choice`` names a function, or is ``"required"``, or the last user message mentions a tool's name
   → one tool call to that function (the named one, else the first mentioned, else the first offered) with
   arguments generated from its JSON schema: for each property, a ``key=value`` found in the user message
   (``city=Paris``) when there is one, else a value derived from the schema (enum's first value, example,
   ``"sample"``, 1, true, …).
4. Otherwise → text.
Text is ``max_tokens`` tokens long (``finish_reason = "length"``) when ``max_tokens`` is set, else a length
drawn from a log-normal fitted to the Azure conversation trace's output lengths (median 129, σ of log 0.86),
ending with ``"."`` (``finish_reason = "stop"``). Everything is seeded from ``seed`` (or the messages), so the
same request gives the same answer.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from switchyard.accelerator.pool.tokens import count_tokens
from switchyard.accelerator.pool.types import InferenceRequest, ToolCall

__all__ = ["Completion", "complete"]

TRACE_MEDIAN_OUTPUT_TOKENS = 129.0  # Azure LLM inference trace 2023, conversation, GeneratedTokens
TRACE_LOG_SIGMA = 0.86
MAX_DRAWN_TOKENS = 1000
_WORDS = [
    "the",
    "fleet",
    "schedules",
    "each",
    "request",
    "on",
    "a",
    "replica",
    "while",
    "tokens",
    "stream",
    "back",
    "to",
    "the",
    "agent",
    "and",
    "every",
    "chip",
    "microsecond",
    "is",
    "attributed",
    "to",
    "the",
    "tenant",
    "that",
    "used",
    "it",
    "so",
    "invoices",
    "match",
    "the",
    "work",
    "done",
    "by",
    "the",
    "cluster",
    "batching",
    "prefill",
    "decode",
    "cache",
    "router",
    "latency",
    "throughput",
    "budget",
    "model",
    "tool",
    "answer",
    "plan",
    "result",
]


@dataclass(frozen=True, slots=True)
class Completion:
    """What the simulated model says: text tokens or tool calls, and why it stopped."""

    text_tokens: tuple[str, ...]
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str

    @property
    def completion_tokens(self) -> int:
        calls = sum(count_tokens(c.name) + count_tokens(c.arguments) for c in self.tool_calls)
        return len(self.text_tokens) + calls


def _rng(request: InferenceRequest) -> random.Random:
    if request.seed is not None:
        return random.Random(request.seed)
    digest = hashlib.sha256(json.dumps(list(request.messages), sort_keys=True, default=str).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(t.get("function", {}).get("name", "")) for t in tools if t.get("type", "function") == "function"]


def _choose_tool(request: InferenceRequest) -> str | None:
    names = _tool_names(request.tools)
    choice = request.tool_choice
    if not names or choice == "none":
        return None
    if isinstance(choice, Mapping):
        return str(choice.get("function", {}).get("name")) or None
    last = request.messages[-1] if request.messages else {}
    if last.get("role") == "tool":
        return None
    if choice == "required":
        return names[0]
    if last.get("role") == "user":
        text = _text(last.get("content"))
        mentioned = [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]
        if mentioned:
            return mentioned[0]
    return None


def _value(schema: Mapping[str, Any], name: str, hints: Mapping[str, str], rng: random.Random) -> Any:
    kind = schema.get("type")
    if name in hints:
        raw = hints[name]
        if kind in ("integer", "number"):
            try:
                return int(raw) if kind == "integer" else float(raw)
            except ValueError:
                pass
        elif kind == "boolean":
            return raw.lower() in ("true", "yes", "1")
        else:
            return raw
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    if schema.get("examples"):
        return schema["examples"][0]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    if kind == "array":
        return [_value(schema.get("items", {}), "", {}, rng)]
    if kind == "object":
        return _arguments(schema, {}, rng)
    return "sample"


def _arguments(schema: Mapping[str, Any], hints: Mapping[str, str], rng: random.Random) -> dict[str, Any]:
    properties = schema.get("properties", {})
    required = schema.get("required", list(properties))
    return {name: _value(properties[name], name, hints, rng) for name in properties if name in required}


def _tool_call(request: InferenceRequest, name: str, rng: random.Random) -> ToolCall:
    tool = next(t for t in request.tools if t.get("function", {}).get("name") == name)
    last = request.messages[-1] if request.messages else {}
    hints = dict(re.findall(r"(\w+)=([^\s,;]+)", _text(last.get("content"))))
    arguments = _arguments(tool["function"].get("parameters") or {}, hints, rng)
    call_id = f"call_{rng.getrandbits(64):016x}"
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments, separators=(",", ":")))


def _length(request: InferenceRequest, rng: random.Random) -> tuple[int, str]:
    if request.max_tokens is not None:
        return request.max_tokens, "length"
    drawn = math.exp(math.log(TRACE_MEDIAN_OUTPUT_TOKENS) + TRACE_LOG_SIGMA * rng.gauss(0, 1))
    return max(2, min(MAX_DRAWN_TOKENS, round(drawn))), "stop"


def _tool_results_preamble(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    names = {
        call.get("id"): call.get("function", {}).get("name", "tool")
        for m in messages
        for call in (m.get("tool_calls") or ())
    }
    results = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.append(f"Result of {names.get(message.get('tool_call_id'), 'tool')}: {_text(message.get('content'))}.")
    return re.findall(r"\s*\w+|\s*[^\w\s]", " ".join(reversed(results)))


def complete(request: InferenceRequest) -> Completion:
    """The simulated model's answer to ``request`` (deterministic; see the module docstring)."""
    rng = _rng(request)
    tool = _choose_tool(request)
    if tool is not None:
        return Completion((), (_tool_call(request, tool, rng),), "tool_calls")
    length, reason = _length(request, rng)
    tokens: list[str] = []
    if request.messages and request.messages[-1].get("role") == "tool":
        tokens = _tool_results_preamble(request.messages)
    while len(tokens) < length:
        tokens.append(" " + rng.choice(_WORDS) if tokens else rng.choice(_WORDS).capitalize())
    tokens = tokens[:length]
    if reason == "stop":
        tokens[-1] = "."
    return Completion(tuple(tokens), (), reason)
