"""OpenAI's ``filters`` on a vector store file's ``attributes``: parsed once, bounded, then applied to each file.

A comparison (``eq ne gt gte lt lte in nin``) names a key and a value (a string, number or boolean; ``in``/``nin``
a list of strings and numbers); a compound (``and``/``or``) holds filters. A file without the key matches only
``ne`` and ``nin`` (it is not equal to anything), and the order comparisons hold only between numbers or between
strings (``True`` is not a number here). A filter is at most ``MAX_DEPTH`` deep and ``MAX_NODES`` large, so a
hostile body costs at most a few hundred comparisons a file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from switchyard.platform.http.errors import InvalidRequest

__all__ = ["MAX_DEPTH", "MAX_NODES", "Comparison", "Compound", "Filter", "matches", "parse_filter"]

MAX_DEPTH = 4
MAX_NODES = 64
MAX_LIST = 100
COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
Scalar = str | float | bool


@dataclass(frozen=True, slots=True)
class Comparison:
    key: str
    type: str
    value: Scalar | tuple[str | float, ...]


@dataclass(frozen=True, slots=True)
class Compound:
    type: Literal["and", "or"]
    filters: tuple[Comparison | Compound, ...]


Filter = Comparison | Compound


def _refuse(message: str, path: str) -> InvalidRequest:
    return InvalidRequest(message, param=path, code="invalid_value")


def _scalar(value: Any, path: str) -> Scalar:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    raise _refuse("a filter's value is a string, a finite number or a boolean", path)


def parse_filter(raw: Any, path: str = "filters") -> Filter:
    """``raw`` (the request's JSON) as a filter; 400 naming the offending part when it is not one."""
    budget = [MAX_NODES]

    def parse(node: Any, where: str, depth: int) -> Filter:
        budget[0] -= 1
        if budget[0] < 0:
            raise _refuse(f"a filter holds at most {MAX_NODES} filters", path)
        if depth > MAX_DEPTH:
            raise _refuse(f"filters nest at most {MAX_DEPTH} deep", where)
        if not isinstance(node, Mapping):
            raise _refuse("a filter is an object", where)
        kind = node.get("type")
        if kind in ("and", "or"):
            if set(node) != {"type", "filters"}:
                raise _refuse("a compound filter has exactly `type` and `filters`", where)
            items = node["filters"]
            if not isinstance(items, list) or not items:
                raise _refuse("a compound filter's `filters` is a non-empty array", f"{where}.filters")
            parts = tuple(parse(item, f"{where}.filters[{i}]", depth + 1) for i, item in enumerate(items))
            return Compound(kind, parts)
        if kind not in COMPARISONS:
            raise _refuse(f"a filter's type is one of and, or, {', '.join(COMPARISONS)}", f"{where}.type")
        if set(node) != {"type", "key", "value"}:
            raise _refuse("a comparison filter has exactly `type`, `key` and `value`", where)
        key = node["key"]
        if not isinstance(key, str) or not 1 <= len(key) <= 64:
            raise _refuse("a filter's key is a string of 1 to 64 characters", f"{where}.key")
        value = node["value"]
        if kind in ("in", "nin"):
            if not isinstance(value, list) or len(value) > MAX_LIST:
                raise _refuse(f"`{kind}` compares with an array of at most {MAX_LIST} values", f"{where}.value")
            listed = tuple(_scalar(item, f"{where}.value") for item in value)
            if any(isinstance(item, bool) for item in listed):
                raise _refuse("`in` and `nin` list strings and numbers", f"{where}.value")
            return Comparison(key, kind, listed)  # booleans were refused above
        return Comparison(key, kind, _scalar(value, f"{where}.value"))

    return parse(raw, path, 1)


def _normal(value: Any) -> Any:
    """Numbers compare as floats (``3 == 3.0``); booleans stay booleans (``True`` is not ``1``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _same_kind(a: Any, b: Any) -> bool:
    return (isinstance(a, bool), isinstance(a, str)) == (isinstance(b, bool), isinstance(b, str))


def _compare(comparison: Comparison, attributes: Mapping[str, Any]) -> bool:
    present = comparison.key in attributes
    found = _normal(attributes.get(comparison.key))
    kind, wanted = comparison.type, comparison.value
    if kind in ("in", "nin"):
        assert isinstance(wanted, tuple)
        inside = present and any(_same_kind(found, item) and found == item for item in wanted)
        return inside if kind == "in" else not inside
    if kind in ("eq", "ne"):
        equal = present and _same_kind(found, wanted) and found == wanted
        return equal if kind == "eq" else not equal
    if not present or isinstance(found, bool) or isinstance(wanted, bool) or not _same_kind(found, wanted):
        return False
    if kind == "gt":
        return bool(found > wanted)
    if kind == "gte":
        return bool(found >= wanted)
    if kind == "lt":
        return bool(found < wanted)
    return bool(found <= wanted)


def matches(condition: Filter | None, attributes: Mapping[str, Any]) -> bool:
    """Whether a file with ``attributes`` passes ``condition`` (every file passes ``None``)."""
    if condition is None:
        return True
    if isinstance(condition, Comparison):
        return _compare(condition, attributes)
    results = (matches(part, attributes) for part in condition.filters)
    return all(results) if condition.type == "and" else any(results)
