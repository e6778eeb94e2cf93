"""The deterministic ``sim`` language model: readable placeholder text and a documented tool-calling policy.

Policy, in order:
1. ``tool_choice`` is ``"none"`` or no tools are offered → text.
2. The last message is a tool result → text that starts by quoting the results it answers
   (``"Result of <name>: <content>"``), so agents see their tools' outputs used; unless ``tool_choice`` forces a
   tool (``"required"``, or a named function) not yet called since the last user message: rule 3 calls it. So an
   agent whose answer is itself a tool call (pydantic-ai's ``ToolOutput``) gets that call after its other tools'
   results, and a forced tool is called once per user turn, never in a loop.
3. ``tool_choice`` names a function, or is ``"required"``, or the last user message mentions a tool's name
   → one tool call to that function (the named one, else the first mentioned, else the first offered) with
   arguments generated from its JSON schema: for each property, a ``key=value`` found in the user message
   (``city=Paris``) when there is one, else a value derived from the schema (enum's first value, example,
   ``"sample"``, 1, true, …). A ``tool_choice`` of ``allowed_tools`` narrows the tools offered and its ``mode``
   acts as ``tool_choice``; custom tools are never called.
4. ``response_format`` is ``{"type": "json_object"}`` → a JSON object: an instance of the JSON Schema of an
   object written into the latest system, developer or user message that holds one (as instructor's JSON mode
   asks for its shape), else ``{"answer": "<words>"}``; it is
   ``{"type": "json_schema", "json_schema": {"schema": ...}}`` → JSON valid against the schema, generated as tool
   arguments are (``$ref``/``$defs``, ``anyOf``, ``const``, ``enum``, bounds, lengths and formats respected).
   JSON longer than ``max_tokens`` is cut there (``finish_reason = "length"``), else ``"stop"``.
5. Otherwise → text.
Text is ``max_tokens`` tokens long (``finish_reason = "length"``) when ``max_tokens`` is set, else a length
drawn from a log-normal fitted to the Azure conversation trace's output lengths (median 129, σ of log 0.86),
ending with ``"."`` (``finish_reason = "stop"``). With ``stop`` sequences the text or JSON ends just before the
first one that occurs (``finish_reason = "stop"``). Everything is seeded from ``seed`` (or the messages), so the
same request gives the same answer.

Logprobs (``logprobs: true``, ``top_logprobs: N``) are synthetic, not a language model's: each text token gets a
probability drawn in [0.5, 0.999) from a generator seeded by the request's seed, the token's position and the token
(so they are reproducible), and its ``N`` most likely tokens are the token itself followed by ``N - 1`` distinct
other words of the simulator's vocabulary (with the token's leading space and capitalisation) whose probabilities
fall geometrically and together take at most the rest of the mass. So every logprob is <= 0, the chosen token is
the most likely at its position, the probabilities at a position sum to at most 1, and ``bytes`` is each token's
UTF-8. Tool calls have no logprobs (OpenAI gives none for them either).
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

from switchyard.accelerator.pool.tokens import count_tokens, split_tokens
from switchyard.accelerator.pool.types import InferenceRequest, TokenLogprob, ToolCall

__all__ = ["Completion", "complete"]

TRACE_MEDIAN_OUTPUT_TOKENS = 129.0  # Azure LLM inference trace 2023, conversation, GeneratedTokens
TRACE_LOG_SIGMA = 0.86
MAX_DRAWN_TOKENS = 1000
JSON_OBJECT_WORDS = 8  # the length of the answer in a json_object reply
MAX_SCHEMA_DEPTH = 12  # past this depth (a recursive schema) arrays and optional values are left empty
MAX_JSON_NODES = 2_000  # the most values one schema-generated reply holds
MAX_STRING_CHARS = 10_000
MAX_SCHEMA_SEARCH_CHARS = 200_000  # json_object: how much of a message is searched for a schema of the answer
MAX_SCHEMA_SEARCH_FAILURES = 64  # ... and how many "{" that start no JSON it tries
_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
    "duration": "P1D",
}
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
    text_logprobs: tuple[TokenLogprob, ...] = ()
    """One per text token when the request asks for logprobs (synthetic: see the module docstring), else empty."""

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


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _called_since_user(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """The names of the tools called since the last user message."""
    called: set[str] = set()
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        called.update(str(_get(_get(c, "function"), "name")) for c in message.get("tool_calls") or ())
    return called


def _choose_tool(request: InferenceRequest) -> str | None:
    names = _tool_names(request.tools)
    choice = request.tool_choice
    if not names or choice == "none":
        return None
    last = request.messages[-1] if request.messages else {}
    called = _called_since_user(request.messages) if last.get("role") == "tool" else set()
    if isinstance(choice, Mapping):
        if choice.get("type") != "allowed_tools":  # a named function (or a custom tool, which the sim never calls)
            named = _get(choice.get("function"), "name")
            return named if named in names and named not in called else None
        allowed = choice.get("allowed_tools")
        allowed_names = [_get(_get(t, "function"), "name") for t in _get(allowed, "tools") or ()]
        names = [n for n in names if n in allowed_names]
        choice = _get(allowed, "mode")
        if not names:
            return None
    if last.get("role") == "tool":
        remaining = [n for n in names if n not in called]
        return remaining[0] if choice == "required" and remaining else None
    if choice == "required":
        return names[0]
    if last.get("role") == "user":
        text = _text(last.get("content"))
        mentioned = [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]
        if mentioned:
            return mentioned[0]
    return None


def _value(schema: Any, name: str, hints: Mapping[str, str], root: Any) -> Any:
    """A tool argument: the user's ``name=value`` hint when there is one, else a value from the schema."""
    kind = _get(schema, "type")
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
    return _Instance(root).of(schema)


def _arguments(schema: Any, hints: Mapping[str, str], root: Any) -> dict[str, Any]:
    if isinstance(_get(schema, "$ref"), str):  # a pydantic model's schema: {"$ref": "#/$defs/Model", "$defs": ...}
        schema = _resolve(schema["$ref"], root)
    properties = _get(schema, "properties")
    if not isinstance(properties, Mapping):
        return {}
    required = _get(schema, "required")
    if not isinstance(required, list):
        required = list(properties)
    return {name: _value(properties[name], name, hints, root) for name in properties if name in required}


def _resolve(reference: Any, root: Any) -> Any:
    """The schema a local ``$ref`` (``#/$defs/Name``) points to, or ``None``."""
    if not isinstance(reference, str) or not reference.startswith("#"):
        return None
    node = root
    for part in reference[1:].split("/")[1:] if reference != "#" else ():
        node = _get(node, part.replace("~1", "/").replace("~0", "~"))
    return node


class _Instance:
    """Builds a JSON value valid against a schema (``root`` holds its ``$defs``): the schema's own ``const``,
    ``enum``, ``default`` or example when it has one, else the simplest value of its type within its bounds.

    The schema is the client's: at most ``MAX_JSON_NODES`` values are built (past that arrays are left empty and
    values null, however the schema is shaped), strings are at most ``MAX_STRING_CHARS`` long, and no bound makes
    it fail."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.nodes_left = MAX_JSON_NODES

    def of(self, schema: Any, depth: int = 0) -> Any:
        self.nodes_left -= 1
        if self.nodes_left < 0 or depth > 4 * MAX_SCHEMA_DEPTH:  # a schema that requires itself without end
            return None
        if not isinstance(schema, Mapping):
            return "sample"
        if "$ref" in schema:
            target = _resolve(schema["$ref"], self.root)
            return None if target is None else self.of(target, depth + 1)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        if "default" in schema:
            return schema["default"]
        if isinstance(schema.get("examples"), list) and schema["examples"]:
            return schema["examples"][0]
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                # the first concrete option; deep in a recursive schema, null where it is allowed
                nulls = [o for o in options if _get(o, "type") == "null"]
                concrete = [o for o in options if _get(o, "type") != "null"]
                preferred = nulls if depth > MAX_SCHEMA_DEPTH else concrete
                return self.of((preferred or options)[0], depth + 1)
        if isinstance(schema.get("allOf"), list):
            return self.of(self._merged(schema), depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        if kind == "object":
            properties = schema.get("properties")
            properties = properties if isinstance(properties, Mapping) else {}
            required = schema.get("required")
            wanted = required if isinstance(required, list) else list(properties)
            return {name: self.of(sub, depth + 1) for name, sub in properties.items() if name in wanted}
        if kind == "array":
            return self._array(schema, depth)
        if kind in ("integer", "number"):
            try:
                return _number(schema, integer=kind == "integer")
            except (OverflowError, ValueError, ZeroDivisionError):  # bounds no float can meet
                return 1
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return _string(schema)

    def _merged(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolve(part["$ref"], self.root) if isinstance(part, Mapping) and "$ref" in part else part
            if isinstance(part, Mapping):
                properties = {**(_get(merged, "properties") or {}), **(_get(part, "properties") or {})}
                merged.update({k: v for k, v in part.items() if k != "properties"})
                merged["properties"] = properties
        return merged

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        given = schema.get("prefixItems")
        prefix: list[Any] = given if isinstance(given, list) else []
        size = _bound(schema.get("minItems"), 0 if depth > MAX_SCHEMA_DEPTH else 1)
        if isinstance(schema.get("maxItems"), int):
            size = min(size, schema["maxItems"])
        size = max(size, _bound(schema.get("minItems"), 0), len(prefix))
        items: list[Any] = []
        while len(items) < size and self.nodes_left > 0:
            items.append(
                self.of(prefix[len(items)] if len(items) < len(prefix) else schema.get("items", {}), depth + 1)
            )
        return items


def _bound(value: Any, fallback: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else fallback


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    def limit(key: str) -> float | None:
        value = schema.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    low, high = limit("minimum"), limit("maximum")
    above, below = limit("exclusiveMinimum"), limit("exclusiveMaximum")
    value = 1.0 if low is None else low
    if above is not None and value <= above:
        value = math.floor(above) + 1.0 if integer else above + 1.0
    if high is not None and value > high:
        value = high
    if below is not None and value >= below:
        value = (math.ceil(below) - 1.0) if integer else (below - 1.0 if above is None else (above + below) / 2)
    step = limit("multipleOf")
    if step:
        value = math.ceil(value / step) * step
    if not integer:
        return value
    whole = math.ceil(value)
    return math.floor(high) if high is not None and whole > high else whole


def _string(schema: Mapping[str, Any]) -> str:
    text = _FORMATS.get(str(schema.get("format")), "sample")
    shortest, longest = _bound(schema.get("minLength"), 0), schema.get("maxLength")
    if len(text) < shortest:
        text += "x" * (min(shortest, MAX_STRING_CHARS) - len(text))
    if isinstance(longest, int) and len(text) > longest:
        text = text[: max(longest, 0)]
    return text


def _tool_call(request: InferenceRequest, name: str, rng: random.Random) -> ToolCall:
    tool = next(t for t in request.tools if t.get("function", {}).get("name") == name)
    last = request.messages[-1] if request.messages else {}
    hints = dict(re.findall(r"(\w+)=([^\s,;]+)", _text(last.get("content"))))
    parameters = tool["function"].get("parameters") or {}
    arguments = _arguments(parameters, hints, parameters)
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


def _json_reply(request: InferenceRequest, rng: random.Random) -> str | None:
    """The JSON the model says when ``response_format`` asks for JSON, or ``None``: the format asks for text."""
    kind = _get(request.response_format, "type")
    if kind == "json_object":
        schema = _schema_in_messages(request.messages)
        if schema is not None:
            return json.dumps(_Instance(schema).of(schema), ensure_ascii=False)
        words = [rng.choice(_WORDS) for _ in range(JSON_OBJECT_WORDS)]
        return json.dumps({"answer": " ".join(words).capitalize() + "."})
    if kind == "json_schema":
        schema = _get(_get(request.response_format, "json_schema"), "schema")
        return json.dumps(_Instance(schema).of(schema) if isinstance(schema, Mapping) else {}, ensure_ascii=False)
    return None


def _schema_in_messages(messages: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first JSON Schema of an object written into the latest system, developer or user message that holds
    one, or ``None``: JSON mode with the shape asked for in words (instructor's JSON modes, LangChain's
    ``json_mode``)."""
    decoder = json.JSONDecoder()
    for message in reversed(messages):
        if message.get("role") not in ("system", "developer", "user"):
            continue
        text = _text(message.get("content"))[:MAX_SCHEMA_SEARCH_CHARS]
        start, failures = text.find("{"), 0
        while start != -1 and failures < MAX_SCHEMA_SEARCH_FAILURES:
            try:
                value, end = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):  # no JSON starts here, or JSON nested too deep to read
                failures += 1
                start = text.find("{", start + 1)
                continue
            if isinstance(value, dict) and (_is_schema(value.get("properties")) or _is_schema(value.get("$defs"))):
                return value
            start = text.find("{", end)
    return None


def _is_schema(part: Any) -> bool:
    return isinstance(part, dict) and all(isinstance(value, dict) for value in part.values())


def _until_stop(tokens: list[str], stop: Sequence[str]) -> list[str] | None:
    """The tokens before the first stop sequence in their text, or ``None`` when none occurs."""
    text = "".join(tokens)
    found = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return split_tokens(text[: min(found)]) if found else None


def complete(request: InferenceRequest) -> Completion:
    """The simulated model's answer to ``request`` (deterministic; see the module docstring)."""
    rng = _rng(request)
    tool = _choose_tool(request)
    if tool is not None:
        return Completion((), (_tool_call(request, tool, rng),), "tool_calls")
    reply = _json_reply(request, rng)
    if reply is not None:
        tokens = split_tokens(reply)
        reason = "stop"
        if request.max_tokens is not None and len(tokens) > request.max_tokens:
            tokens, reason = tokens[: request.max_tokens], "length"
    else:
        length, reason = _length(request, rng)
        tokens = []
        if request.messages and request.messages[-1].get("role") == "tool":
            tokens = _tool_results_preamble(request.messages)
        while len(tokens) < length:
            tokens.append(" " + rng.choice(_WORDS) if tokens else rng.choice(_WORDS).capitalize())
        tokens = tokens[:length]
        if reason == "stop":
            tokens[-1] = "."
    stopped = _until_stop(tokens, request.stop)
    if stopped is not None:
        tokens, reason = stopped, "stop"
    alternatives = request.top_logprobs
    if alternatives is None:
        return Completion(tuple(tokens), (), reason)
    seed = request.seed if request.seed is not None else _rng(request).getrandbits(64)
    logprobs = tuple(token_logprob(token, alternatives, f"{seed}:{i}") for i, token in enumerate(tokens))
    return Completion(tuple(tokens), (), reason, logprobs)


_VOCABULARY = sorted(set(_WORDS))
_PUNCTUATION = [".", ",", ";", ":", "!", "?"]
MAX_TOP_LOGPROBS = 20  # OpenAI's bound
LOGPROB_DIGITS = 6


def token_logprob(token: str, top: int, key: str) -> TokenLogprob:
    """A synthetic logprob of ``token`` with its ``top`` most likely tokens (itself first), seeded by ``key``."""
    rng = random.Random(f"{key}:{token}")
    chosen = rng.uniform(0.5, 0.999)
    logprob = round(math.log(chosen), LOGPROB_DIGITS)
    stripped = token.lstrip()
    lead = token[: len(token) - len(stripped)]
    if stripped and not (stripped[0].isalnum() or stripped[0] == "_"):
        pool = [lead + p for p in _PUNCTUATION]
        pool += [lead + w for w in _VOCABULARY]
    else:
        capital = stripped[:1].isupper()
        pool = [lead + (w.capitalize() if capital else w) for w in _VOCABULARY]
    pool = [other for other in dict.fromkeys(pool) if other != token]
    others = rng.sample(pool, min(len(pool), max(0, min(top, MAX_TOP_LOGPROBS) - 1)))
    rest = 1.0 - chosen
    alternatives = [_alternative(token, logprob)] if top > 0 else []
    for rank, other in enumerate(others):
        share = rest * 0.6 * 0.4**rank  # a geometric series: the shares sum to less than the rest of the mass
        alternatives.append(_alternative(other, round(math.log(share), LOGPROB_DIGITS)))
    return TokenLogprob(token, logprob, tuple(token.encode()), tuple(alternatives))


def _alternative(token: str, logprob: float) -> TokenLogprob:
    return TokenLogprob(token, logprob, tuple(token.encode()))
