"""JSON templates: JSON values whose strings hold ``{{ expression }}`` placeholders.

A string that is exactly one placeholder, ``"{{ state.items }}"``, becomes the expression's value, of any JSON
type; any other string has each placeholder replaced by its value's text (:func:`to_text`: ``null`` is ``""``,
lists and objects are JSON). Object keys are not rendered. A placeholder ends at the first ``}}`` outside a string
literal, so ``{{ "}}" }}`` is the text ``}}``.

A template has at most ``MAX_TEMPLATE_NODES`` JSON values and ``MAX_VALUE_SIZE`` characters in its strings, nests
at most ``MAX_TEMPLATE_DEPTH`` deep, and renders to at most ``MAX_VALUE_SIZE`` characters (counted as the rendered
strings' lengths and the size as JSON of values that replace a whole string).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from switchyard.agents.sizes import schema_nodes
from switchyard.agents.workflows.expressions import MAX_VALUE_SIZE, Scope, json_size, parse, to_text
from switchyard.agents.workflows.syntax import ExpressionError

__all__ = ["MAX_TEMPLATE_DEPTH", "MAX_TEMPLATE_NODES", "parse_template", "render"]

MAX_TEMPLATE_NODES = 1_000
MAX_TEMPLATE_DEPTH = 32


def parse_template(template: Any) -> None:
    """Check that ``template`` is within the bounds and every placeholder in it parses (at save time);
    raises :class:`ExpressionError` naming the placeholder."""
    if schema_nodes(template, past=MAX_TEMPLATE_NODES) > MAX_TEMPLATE_NODES:
        raise ExpressionError(f"template has more than {MAX_TEMPLATE_NODES:,} JSON values")
    chars = 0
    for text in _strings(template, depth=0):
        chars += len(text)
        if chars > MAX_VALUE_SIZE:
            raise ExpressionError(f"template has more than {MAX_VALUE_SIZE:,} characters in its strings")
        for start, end, source in _placeholders(text):
            try:
                parse(source)
            except ExpressionError as exc:
                raise ExpressionError(f"placeholder {text[start:end][:80]!r}: {exc}") from None


def render(template: Any, scope: Scope) -> Any:
    """``template`` with its placeholders evaluated in ``scope``; raises :class:`ExpressionError`."""
    budget = [MAX_VALUE_SIZE]
    return _render(template, scope, 0, budget)


def _render(template: Any, scope: Scope, depth: int, budget: list[int]) -> Any:
    if depth > MAX_TEMPLATE_DEPTH:
        raise ExpressionError(f"template is nested more than {MAX_TEMPLATE_DEPTH} deep")
    if isinstance(template, dict):
        return {key: _render(value, scope, depth + 1, budget) for key, value in template.items()}
    if isinstance(template, list):
        return [_render(item, scope, depth + 1, budget) for item in template]
    if not isinstance(template, str):
        return template
    scope.budget.spend(len(template))
    placeholders = _placeholders(template)
    if len(placeholders) == 1 and placeholders[0][:2] == (0, len(template)):
        value = parse(placeholders[0][2]).evaluate(scope)
        _spend(budget, json_size(value, past=budget[0]))
        return value
    parts, done = [], 0
    for start, end, source in placeholders:
        parts.append(template[done:start])
        parts.append(to_text(parse(source).evaluate(scope)))
        _spend(budget, len(parts[-1]) + len(parts[-2]))
        done = end
    parts.append(template[done:])
    _spend(budget, len(parts[-1]))
    return "".join(parts)


def _spend(budget: list[int], chars: int) -> None:
    budget[0] -= chars
    if budget[0] < 0:
        raise ExpressionError(f"template renders to more than {MAX_VALUE_SIZE:,} characters")


def _strings(template: Any, depth: int) -> Iterator[str]:
    if depth > MAX_TEMPLATE_DEPTH:
        raise ExpressionError(f"template is nested more than {MAX_TEMPLATE_DEPTH} deep")
    if isinstance(template, str):
        yield template
    elif isinstance(template, dict):
        for value in template.values():
            yield from _strings(value, depth + 1)
    elif isinstance(template, list):
        for item in template:
            yield from _strings(item, depth + 1)


def _placeholders(text: str) -> list[tuple[int, int, str]]:
    """The placeholders of ``text``: (start, end, expression source), ``end`` just after the closing ``}}``."""
    found: list[tuple[int, int, str]] = []
    start = text.find("{{")
    while start != -1:
        i = start + 2
        while not text.startswith("}}", i):
            if i >= len(text):
                raise ExpressionError("unclosed {{ in template", start)
            if text[i] in "'\"":
                i = _string_end(text, i)
            else:
                i += 1
        found.append((start, i + 2, text[start + 2 : i]))
        start = text.find("{{", i + 2)
    return found


def _string_end(text: str, start: int) -> int:
    """The offset just after the string literal opening at ``start`` (or the text's end when it is unterminated;
    the expression's parser then says so)."""
    i = start + 1
    while i < len(text) and text[i] != text[start]:
        i += 2 if text[i] == "\\" else 1
    return i + 1
