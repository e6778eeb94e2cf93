"""The deterministic ``sim`` language model: readable placeholder text and a documented tool-calling policy.

Policy, in order:
1. ``tool_choice`` is ``"none"`` or no tools are offered → text.
2. The last message is a tool result → text that starts by quoting the results it answers
   (``"Result of <name>: <content>"``, whole up to the limit or ``MAX_DRAWN_TOKENS``: the text is at least as long
   as its quote), so agents see their tools' outputs used; unless ``tool_choice`` forces a
   tool (``"required"``, or a named function) not yet called since the last user message: rule 3 calls it. So an
   agent whose answer is itself a tool call (pydantic-ai's ``ToolOutput``) gets that call after its other tools'
   results, and a forced tool is called once per user turn, never in a loop.
3. ``tool_choice`` names a function, or is ``"required"``, or the last user message mentions a tool's name
   → one tool call to that function (the named one, else the first mentioned, else the first offered) with
   arguments generated from its JSON schema: for each property, a ``key=value`` found in the user message
   (``city=Paris``) when there is one, else a value derived from the schema (enum's first value, example,
   ``"sample"`` or a string matching its ``pattern``, 1, true, …; optional properties filled in half the time, as
   ``pool/sim_json.py`` documents). A ``tool_choice`` of ``allowed_tools`` narrows the tools offered and its ``mode``
   acts as ``tool_choice``; custom tools are never called.
4. ``response_format`` is ``{"type": "json_object"}`` → a JSON object: an instance of the JSON Schema of an
   object written into the latest system, developer or user message that holds one (as instructor's JSON mode
   asks for its shape), else ``{"answer": "<words>"}``; it is
   ``{"type": "json_schema", "json_schema": {"schema": ...}}`` → JSON valid against the schema, generated as tool
   arguments are (``$ref``/``$defs``, ``anyOf``, ``const``, ``enum``, bounds, lengths, formats and patterns
   respected; when the last message holds a ``key=value`` hint for a property of an object schema, the object is
   built as tool arguments are, hints included: ``allowed=false`` turns a guardrail judge's verdict into a
   refusal).
5. Otherwise → text.

Lengths are in the tokens of ``pool/tokens.py`` (at most four characters each), and the whole answer — text, JSON
or a tool call's name and arguments — is at most ``max_tokens`` of them:
- Text is about a length drawn from a log-normal fitted to the Azure conversation trace's output lengths (median
  129, σ of log 0.86, at least 2 and at most ``MAX_DRAWN_TOKENS``), seeded by the request, in whole words ending
  with ``"."`` (``finish_reason = "stop"``: the model stopped on its own), whatever ``max_tokens`` is. Only a
  drawn length above ``max_tokens`` is cut there (``finish_reason = "length"``, cut mid-word if the limit falls
  there). vLLM's sampling extensions ask for other lengths: ``ignore_eos`` makes the text exactly ``max_tokens``
  long (``"length"``; benchmark clients send it to force lengths; no effect without ``max_tokens``), and
  ``min_tokens`` raises the drawn length to at least that many tokens (still cut at ``max_tokens``).
- JSON and tool arguments are built within one budget per request (``pool/sim_json.py``: ``MAX_ANSWER_NODES``
  values and schema steps, ``MAX_ANSWER_CHARS`` characters, one string at most ``MAX_STRING_CHARS``), which no
  property, ``allOf`` level or ``$ref`` resets. An answer whose budget ran out is cut short of its schema
  (``finish_reason = "length"``); without ``max_tokens`` that budget is the only bound (so such an answer is at
  most ``MAX_ANSWER_CHARS`` characters, hence tokens).
- JSON longer than ``max_tokens`` is cut there (``finish_reason = "length"``), else ``"stop"``.
- A tool call longer than ``max_tokens`` is cut as OpenAI cuts one: the call is returned with its arguments
  ending where the limit falls (not valid JSON) and ``finish_reason = "length"``; when not even its name and one
  token of arguments fit, there is no call (no text either) and ``finish_reason = "length"``.
A request's ``output_ceiling`` (the most its budget hold covers) bounds all of these as ``max_tokens`` does
(``ignore_eos`` aims at ``max_tokens``, never at the ceiling). ``completion_tokens`` counts exactly the tokens
returned. With ``stop`` sequences the text or JSON ends just before the first one that occurs, without the
whitespace before it (``finish_reason = "stop"``). Everything is seeded from ``seed`` (or the messages), so the
same request gives the same answer. Messages are searched (for a tool's name, ``key=value`` hints, a schema in the
instructions) in their first ``MAX_SCHEMA_SEARCH_CHARS`` characters.

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
from dataclasses import dataclass, replace
from typing import Any

from switchyard.accelerator.pool.sim_json import MAX_ANSWER_CHARS, AnswerBudget, SchemaInstance
from switchyard.accelerator.pool.tokens import CHARS_PER_TOKEN, count_tokens, split_tokens
from switchyard.accelerator.pool.types import InferenceRequest, TokenLogprob, ToolCall

__all__ = ["Completion", "complete"]

TRACE_MEDIAN_OUTPUT_TOKENS = 129.0  # Azure LLM inference trace 2023, conversation, GeneratedTokens
TRACE_LOG_SIGMA = 0.86
MAX_DRAWN_TOKENS = 1000
JSON_OBJECT_WORDS = 8  # the length of the answer in a json_object reply
MAX_SCHEMA_SEARCH_CHARS = 200_000  # json_object: how much of a message is searched for a schema of the answer
MAX_SCHEMA_SEARCH_FAILURES = 64  # ... and how many "{" that start no JSON it tries
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


def _values_rng(request: InferenceRequest) -> random.Random:
    """The generator of a structured answer's values (optional properties, ``pattern`` strings): seeded by the
    request as ``_rng`` is, but apart from it, so text and tool-call ids do not depend on the schema."""
    return random.Random(f"values:{_rng(request).getrandbits(64)}")


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
        text = _text(last.get("content"))[:MAX_SCHEMA_SEARCH_CHARS]
        mentioned = [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]
        if mentioned:
            return mentioned[0]
    return None


def _tool_call(request: InferenceRequest, name: str, rng: random.Random) -> tuple[ToolCall, bool]:
    """The call to tool ``name`` with arguments from its schema, and whether their budget ran out."""
    tool = next(t for t in request.tools if t.get("function", {}).get("name") == name)
    hints = _hints(request)
    parameters = tool["function"].get("parameters") or {}
    budget = AnswerBudget()
    instance = SchemaInstance(parameters, budget, _values_rng(request))
    arguments, exhausted = _serialised(instance.arguments(parameters, hints), budget)
    call_id = f"call_{rng.getrandbits(64):016x}"
    return ToolCall(id=call_id, name=name, arguments=arguments), exhausted


def _tool_answer(request: InferenceRequest, name: str, rng: random.Random) -> Completion:
    """One tool call, cut at ``max_tokens`` as OpenAI cuts one: its arguments end where the limit falls
    (``finish_reason: "length"``); when not even the name and one token of arguments fit, no call at all."""
    call, exhausted = _tool_call(request, name, rng)
    limit = request.most_output_tokens
    if limit is not None:
        name_tokens, arguments = count_tokens(call.name), split_tokens(call.arguments)
        if name_tokens + len(arguments) > limit:
            if limit <= name_tokens:
                return Completion((), (), "length")
            cut = replace(call, arguments="".join(arguments[: limit - name_tokens]))
            return Completion((), (cut,), "length")
    return Completion((), (call,), "length" if exhausted else "tool_calls")


def _serialised(value: Any, budget: AnswerBudget, *, compact: bool = True) -> tuple[str, bool]:
    """A generated value's JSON (never longer than ``MAX_ANSWER_CHARS``) and whether its budget ran out."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":") if compact else None)
    if len(text) > MAX_ANSWER_CHARS:  # the budget's count is exact but for nulls put in once it ran out
        text, budget.exhausted = text[:MAX_ANSWER_CHARS], True
    return text, budget.exhausted


def _word(rng: random.Random, *, first: bool) -> list[str]:
    word = rng.choice(_WORDS)
    return split_tokens(word.capitalize() if first else " " + word)


def _text_tokens(request: InferenceRequest, rng: random.Random) -> tuple[list[str], str]:
    """Placeholder text of the drawn length: whole words ending with ``"."`` when the model stops on its own,
    cut exactly at the limit (mid-word if it falls there) when the limit stops it."""
    tokens = []
    if request.messages and request.messages[-1].get("role") == "tool":  # quoted whole, up to the limit
        limit = request.most_output_tokens or MAX_DRAWN_TOKENS
        tokens = _tool_results_preamble(request.messages, limit - 1)  # and its full stop
    length, reason = _length(request, rng, least=len(tokens) + 1 if tokens else 0)
    if reason == "length":
        while len(tokens) < length:
            tokens += _word(rng, first=not tokens)
        return tokens[:length], reason
    while True:
        word = _word(rng, first=not tokens)
        if tokens and len(tokens) + len(word) >= length:
            return [*tokens[: length - 1], "."], reason
        tokens += word


def _length(request: InferenceRequest, rng: random.Random, *, least: int = 0) -> tuple[int, str]:
    """The text's length in tokens and why it ends there: the drawn length (``"stop"``, the model stopped on its
    own), raised to ``least`` (a quote of tool results and its full stop) and ``min_tokens``, or ``max_tokens``
    itself with ``ignore_eos``; cut at ``max_tokens`` or the output ceiling when it passes either (``"length"``)."""
    drawn = math.exp(math.log(TRACE_MEDIAN_OUTPUT_TOKENS) + TRACE_LOG_SIGMA * rng.gauss(0, 1))
    length = max(2, least, min(MAX_DRAWN_TOKENS, round(drawn)))
    if request.ignore_eos and request.max_tokens is not None:
        length = request.max_tokens  # it never stops on its own: the limit stops it
    if request.min_tokens is not None:
        length = max(length, request.min_tokens)
    most = request.most_output_tokens  # the client's max_tokens, or the most its budget hold covers
    if most is not None and (length > most or (request.ignore_eos and length == most)):
        return most, "length"
    return length, "stop"


def _tool_results_preamble(messages: Sequence[Mapping[str, Any]], length: int) -> list[str]:
    """The text quoting the tool results the answer follows, at most ``length`` tokens of it."""
    most_chars = length * (CHARS_PER_TOKEN + 1)
    names = {
        call.get("id"): call.get("function", {}).get("name", "tool")
        for m in messages
        for call in (m.get("tool_calls") or ())
    }
    results = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        name = names.get(message.get("tool_call_id"), "tool")
        results.append(f"Result of {name}: {_text(message.get('content'))[:most_chars]}.")
    return split_tokens(" ".join(reversed(results))[:most_chars])[:length]


def _json_reply(request: InferenceRequest, rng: random.Random) -> tuple[str, bool] | None:
    """The JSON the model says when ``response_format`` asks for JSON, and whether its budget ran out; ``None``:
    the format asks for text."""
    kind = _get(request.response_format, "type")
    schema: Any = None
    if kind == "json_object":
        schema = _schema_in_messages(request.messages)
        if schema is None:
            words = [rng.choice(_WORDS) for _ in range(JSON_OBJECT_WORDS)]
            return json.dumps({"answer": " ".join(words).capitalize() + "."}), False
    elif kind == "json_schema":
        schema = _get(_get(request.response_format, "json_schema"), "schema")
        if not isinstance(schema, Mapping):
            return "{}", False
    else:
        return None
    budget = AnswerBudget()
    instance = SchemaInstance(schema, budget, _values_rng(request))
    hints = _hints(request)
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if kind == "json_schema" and isinstance(properties, Mapping) and set(hints) & set(properties):
        return _serialised(instance.arguments(schema, hints), budget, compact=False)
    return _serialised(instance.of(schema), budget, compact=False)


def _hints(request: InferenceRequest) -> dict[str, str]:
    """The ``name=value`` hints of the last message."""
    last = request.messages[-1] if request.messages else {}
    return dict(re.findall(r"(\w+)=([^\s,;]+)", _text(last.get("content"))[:MAX_SCHEMA_SEARCH_CHARS]))


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
    """The tokens before the first stop sequence in their text (without the whitespace just before it), or
    ``None`` when none occurs."""
    text = "".join(tokens)
    found = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return split_tokens(text[: min(found)].rstrip()) if found else None


def complete(request: InferenceRequest) -> Completion:
    """The simulated model's answer to ``request`` (deterministic; see the module docstring)."""
    rng = _rng(request)
    tool = _choose_tool(request)
    if tool is not None:
        return _tool_answer(request, tool, rng)
    reply = _json_reply(request, rng)
    if reply is not None:
        text, exhausted = reply
        tokens, reason = split_tokens(text), "length" if exhausted else "stop"
        most = request.most_output_tokens
        if most is not None and len(tokens) > most:
            tokens, reason = tokens[:most], "length"
    else:
        tokens, reason = _text_tokens(request, rng)
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
