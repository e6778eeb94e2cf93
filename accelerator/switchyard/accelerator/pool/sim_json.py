"""The sim model's JSON: a value valid against a client's JSON Schema, built within one budget per request.

The schema is the client's, so it may be hostile. ``AnswerBudget`` bounds the work of one request's structured
answer (a ``json_schema``/``json_object`` reply, or all of a tool call's arguments) whatever the schema's shape:

- **nodes** (``MAX_ANSWER_NODES``): every value built costs one, and so does walking the schema: each ``$ref``
  followed (one more per segment of its pointer), each ``allOf`` part merged and each property it copies, each
  ``anyOf``/``oneOf`` option looked at, each property of an object looked at;
- **characters** (``MAX_ANSWER_CHARS``): the JSON text of every key and value, literal values (``const``,
  ``enum``, ``default``, examples, the user's ``key=value`` hints) at their serialised size; one string is at most
  ``MAX_STRING_CHARS`` long.

No property, array item, ``allOf`` level or ``$ref`` re-entry gets a budget of its own: they all spend the one the
request started with. When it runs out, arrays and objects stop growing and the values still missing are null:
the budget is then ``exhausted`` and the answer, cut short of the schema, ends with ``finish_reason: "length"``.

What the values are (``SchemaInstance``), seeded by the request (its ``rng``):

- an object has every property its ``required`` list names, and each other one with probability
  ``OPTIONAL_PROPERTY_CHANCE`` (0.5); with no ``required`` list, or an empty one, every property (instructor's
  ``Iterable`` model requires none, and its one property is the answer); deep in a recursive schema, only the
  required ones;
- an array has ``minItems`` items, and at least one when ``maxItems`` allows (an empty list rarely answers
  anything; deep in a recursive schema, none); a ``default`` of ``[]`` or ``{}`` where the schema describes items
  or properties is a placeholder, not the answer (any other ``default``, ``const``, ``enum``'s first value and
  examples are);
- a string is its ``format``'s example, else ``"sample"``, unless it does not match the schema's ``pattern``:
  then one generated from the pattern (``pool/sim_pattern.py``: the common subset of ECMA regular expressions,
  each string checked with ``re.search`` as JSON Schema's unanchored ``pattern`` means), within ``minLength`` and
  ``maxLength``; a pattern outside that subset keeps the plain value;
- a number is the lowest its bounds (``minimum``, ``exclusiveMinimum``, ``multipleOf``, ...) allow from 1 up.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from typing import Any

from switchyard.accelerator.pool.sim_pattern import candidates, matches

__all__ = ["MAX_ANSWER_CHARS", "MAX_ANSWER_NODES", "MAX_STRING_CHARS", "AnswerBudget", "SchemaInstance"]

MAX_ANSWER_NODES = 4_000
MAX_ANSWER_CHARS = 32_768
MAX_STRING_CHARS = 10_000
MAX_SCHEMA_DEPTH = 12  # past this depth (a recursive schema) arrays and optional values are left empty
OPTIONAL_PROPERTY_CHANCE = 0.5  # how likely a property left out of its object's ``required`` list is filled in
_RESERVED_CHARS = 512  # nulls put in once the budget is spent are not counted: at most one per open container
_JSON_TYPES = 8  # a "type" list names at most the seven JSON types (the rest is not looked at)
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


class AnswerBudget:
    """What one request's structured answer may still cost, in nodes and characters; spent, never reset."""

    def __init__(self, nodes: int = MAX_ANSWER_NODES, chars: int = MAX_ANSWER_CHARS - _RESERVED_CHARS) -> None:
        self.nodes_left = nodes
        self.chars_left = chars
        self.exhausted = False
        # a literal's serialised size by id, with the literal (so its id is not reused): sized once however often
        self._sizes: dict[int, tuple[Any, int]] = {}

    def step(self, count: int = 1) -> bool:
        """Spend ``count`` nodes; ``False`` (and exhausted) when fewer are left."""
        if count > self.nodes_left:
            self.nodes_left, self.exhausted = 0, True
            return False
        self.nodes_left -= count
        return True

    def chars(self, count: int) -> bool:
        """Spend ``count`` characters; ``False`` (and exhausted) when fewer are left."""
        if count > self.chars_left:
            self.chars_left, self.exhausted = 0, True
            return False
        self.chars_left -= count
        return True

    def take_chars(self, wanted: int) -> int:
        """Spend up to ``wanted`` characters; returns how many there were (fewer: exhausted)."""
        granted = min(wanted, self.chars_left)
        self.chars_left -= granted
        self.exhausted = self.exhausted or granted < wanted
        return granted

    def literal(self, value: Any) -> bool:
        """Spend a literal value's serialised size; ``False`` when it does not fit (or is not JSON)."""
        known = self._sizes.get(id(value))
        size = None if known is None else known[1]
        if size is None:
            if isinstance(value, str) and len(value) > self.chars_left:
                size = len(value)  # too long whatever its escapes: not serialised to learn it
            else:
                try:
                    size = len(json.dumps(value, ensure_ascii=False))
                except (TypeError, ValueError, RecursionError):
                    self.exhausted = True
                    return False
            self._sizes[id(value)] = (value, size)
        return self.chars(size)


class SchemaInstance:
    """Builds a JSON value valid against a schema (``root`` holds its ``$defs``) within ``budget``: the schema's
    own ``const``, ``enum``, ``default`` or example when it has one, else the simplest value of its type within its
    bounds. No bound makes it fail; a spent budget makes it stop (see the module docstring)."""

    def __init__(self, root: Any, budget: AnswerBudget, rng: random.Random | None = None) -> None:
        self.root = root
        self.budget = budget
        self.rng = rng if rng is not None else random.Random(0)
        """Which optional properties are filled in and the characters of ``pattern`` strings (seed it by the
        request: the same request, the same answer)."""

    def arguments(self, schema: Any, hints: Mapping[str, str]) -> dict[str, Any]:
        """A tool call's arguments: each required property (every one when none is; each other one with
        ``OPTIONAL_PROPERTY_CHANCE``, and always when hinted) from the user's ``name=value`` hint when there is
        one, else from its schema."""
        if isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):  # a pydantic model's schema
            schema = self.resolve(schema["$ref"])
        if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
            return {}
        return self._object(schema, 0, hints)

    def resolve(self, reference: Any) -> Any:
        """The schema a local ``$ref`` (``#/$defs/Name``) points to, or ``None``; each segment costs a node."""
        if not isinstance(reference, str) or not reference.startswith("#"):
            return None
        parts = reference[1:].split("/")[1:] if reference != "#" else []
        if not self.budget.step(1 + len(parts)):
            return None
        node = self.root
        for part in parts:
            node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, Mapping) else None
        return node

    def of(self, schema: Any, depth: int = 0) -> Any:
        """A value valid against ``schema``, or ``None`` once the budget is spent."""
        if depth > 4 * MAX_SCHEMA_DEPTH:  # a schema that requires itself without end
            self.budget.exhausted = True
            return None
        if not self.budget.step():
            return None
        if not isinstance(schema, Mapping):
            return self._text("sample")
        if "$ref" in schema:
            target = self.resolve(schema["$ref"])
            return None if target is None else self.of(target, depth + 1)
        if "const" in schema:
            return self._literal(schema["const"])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self._literal(schema["enum"][0])
        if "default" in schema and not _empty_default(schema):
            return self._literal(schema["default"])
        if isinstance(schema.get("examples"), list) and schema["examples"]:
            return self._literal(schema["examples"][0])
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return self._option(options, depth)
        if isinstance(schema.get("allOf"), list):
            merged = self._merged(schema)
            return None if merged is None else self.of(merged, depth + 1)
        return self._typed(schema, depth)

    def _typed(self, schema: Mapping[str, Any], depth: int) -> Any:
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind[:_JSON_TYPES] if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        if kind == "object":
            return self._object(schema, depth, {})
        if kind == "array":
            return self._array(schema, depth)
        if kind in ("integer", "number"):
            try:
                number = _number(schema, integer=kind == "integer")
            except (OverflowError, ValueError, ZeroDivisionError):  # bounds no float can meet
                number = 1
            return self._literal(number)
        if kind == "boolean":
            return self._literal(True)
        if kind == "null":
            return self._literal(None)
        return self._string(schema)

    def _literal(self, value: Any) -> Any:
        return value if self.budget.literal(value) else None

    def _text(self, text: str) -> str | None:
        return text if self.budget.chars(len(text) + 2) else None

    def _option(self, options: list[Any], depth: int) -> Any:
        """The first concrete option; deep in a recursive schema, null where it is allowed."""
        if not self.budget.step(len(options)):
            return None
        nulls = [o for o in options if isinstance(o, Mapping) and o.get("type") == "null"]
        concrete = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
        preferred = nulls if depth > MAX_SCHEMA_DEPTH else concrete
        return self.of((preferred or options)[0], depth + 1)

    def _merged(self, schema: Mapping[str, Any]) -> dict[str, Any] | None:
        """``schema`` with its ``allOf`` parts merged in (their properties together), or ``None`` when merging
        would spend more than the budget: every part and every key and property it brings costs a node."""
        parts = schema["allOf"]
        if not self.budget.step(len(schema) + len(parts)):
            return None
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        own = merged.get("properties")
        properties: dict[str, Any] = dict(own) if isinstance(own, Mapping) and self.budget.step(len(own)) else {}
        for part in parts:
            if isinstance(part, Mapping) and "$ref" in part:
                part = self.resolve(part["$ref"])
            if not isinstance(part, Mapping):
                continue
            brought = part.get("properties")
            brought = brought if isinstance(brought, Mapping) else {}
            if not self.budget.step(len(part) + len(brought)):
                return None
            merged.update((k, v) for k, v in part.items() if k != "properties")
            properties.update(brought)
        merged["properties"] = properties
        return merged

    def _object(self, schema: Mapping[str, Any], depth: int, hints: Mapping[str, str]) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        value: dict[str, Any] = {}
        if not self.budget.step(len(properties) + (len(required) if isinstance(required, list) else 0)):
            return value
        # no property required (no list, or an empty one: instructor's Iterable model): the properties are the answer
        wanted = {n for n in required if isinstance(n, str)} if isinstance(required, list) else None
        wanted = wanted or None
        if not self.budget.chars(2):
            return value
        optional = depth <= MAX_SCHEMA_DEPTH  # deep in a recursive schema, only what is required
        for name, sub in properties.items():
            if not isinstance(name, str):
                continue
            chosen = wanted is None or name in wanted or name in hints
            if not chosen and not (optional and self.rng.random() < OPTIONAL_PROPERTY_CHANCE):
                continue
            if not self.budget.chars(len(json.dumps(name, ensure_ascii=False)) + 4):  # "name": value,
                break
            value[name] = self._hinted(sub, hints[name]) if name in hints else self.of(sub, depth + 1)
            if self.budget.exhausted:
                break
        return value

    def _hinted(self, schema: Any, raw: str) -> Any:
        """The user's ``name=value`` hint, as the property's type wants it."""
        kind = schema.get("type") if isinstance(schema, Mapping) else None
        value: Any = raw
        if kind in ("integer", "number"):
            try:
                value = int(raw) if kind == "integer" else float(raw)
            except ValueError:
                value = raw
        elif kind == "boolean":
            value = raw.lower() in ("true", "yes", "1")
        return self._literal(value)

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        given = schema.get("prefixItems")
        prefix: list[Any] = given if isinstance(given, list) else []
        size = _bound(schema.get("minItems"), 0 if depth > MAX_SCHEMA_DEPTH else 1)
        if isinstance(schema.get("maxItems"), int):
            size = min(size, schema["maxItems"])
        size = max(size, _bound(schema.get("minItems"), 0), len(prefix))
        items: list[Any] = []
        if not self.budget.chars(2):
            return items
        while len(items) < size and not self.budget.exhausted and self.budget.chars(2):  # an item and ", "
            items.append(
                self.of(prefix[len(items)] if len(items) < len(prefix) else schema.get("items", {}), depth + 1)
            )
        return items

    def _string(self, schema: Mapping[str, Any]) -> str:
        given = schema.get("format")
        text = _FORMATS.get(given, "sample") if isinstance(given, str) else "sample"
        shortest, longest = _bound(schema.get("minLength"), 0), schema.get("maxLength")
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not matches(pattern, text):
            matched = self._matching(pattern, shortest, longest if isinstance(longest, int) else None)
            if matched is not None:
                text = matched
        if len(text) < shortest:
            text += "x" * (min(shortest, MAX_STRING_CHARS) - len(text))
            self.budget.exhausted = self.budget.exhausted or shortest > MAX_STRING_CHARS
        if isinstance(longest, int) and len(text) > longest:
            text = text[: max(longest, 0)]
        granted = self.budget.take_chars(len(text) + 2)
        return text[: max(0, granted - 2)]

    def _matching(self, pattern: str, shortest: int, longest: int | None) -> str | None:
        """A string matching ``pattern`` within the lengths, or ``None`` (then the plain value stands, unmatched).
        Each string tried costs a node, and one that does not match its characters: work the budget bounds. One
        that does not fit the characters left spends the budget (the answer is cut short)."""
        room = self.budget.chars_left - 2
        if self.budget.exhausted or room < 0:
            return None
        most_chars = min(MAX_STRING_CHARS, room, MAX_STRING_CHARS if longest is None else longest)
        for text in candidates(pattern, self.rng, shortest=shortest, most_chars=most_chars):
            if not self.budget.step():
                return None
            if len(text) > most_chars and most_chars == room:  # the budget, not the schema, is too small
                self.budget.chars_left, self.budget.exhausted = 0, True
                return None
            if len(text) <= most_chars and matches(pattern, text):
                return text
            if not self.budget.chars(len(text)):
                return None
        return None


def _empty_default(schema: Mapping[str, Any]) -> bool:
    """Whether ``default`` is an empty array or object where the schema describes items or properties: a
    placeholder (instructor's ``Iterable`` model defaults its list to ``[]``), not an answer worth giving."""
    default = schema.get("default")
    if isinstance(default, list) and not default:
        return "items" in schema or "prefixItems" in schema
    return isinstance(default, dict) and not default and isinstance(schema.get("properties"), Mapping)


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
