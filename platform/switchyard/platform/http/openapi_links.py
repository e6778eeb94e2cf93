"""OpenAPI links: what a route answers, followed into the routes that take it.

A stateful client (schemathesis' stateful phase, a generated SDK's docs) reads from them that ``POST /v1/threads``
answers a thread whose ``id`` is the ``thread_id`` of ``/v1/threads/{thread_id}/messages``. They are derived from the
document itself, so a new route is linked without anyone writing links:

- a path parameter is the ``id`` of the answer when the answer is that resource: the route's path extends the
  answering route's path by it (``/v1/api-keys`` → ``/v1/api-keys/{key_id}``), or it is named after the answer's
  ``object`` (``thread.run`` → ``run_id``); else it is the answer's field of the same name (a run's ``thread_id``),
  or the answering request's own path parameter;
- a required body field named after the answer's ``object`` (``agent_id``) is its ``id``;
- only the answered resource itself is followed into routes that change things; a list's first item and a field
  naming another resource (a run's ``agent_id``) only into routes that read (GET), so following a link never
  deletes whatever happens to come first (the caller's own API key).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["add_links"]

SCHEMAS = "#/components/schemas/"


@dataclass(frozen=True, slots=True)
class _Answer:
    """A resource in a route's answer: where it is (``/data/0`` in a list) and what it has."""

    pointer: str
    name: str  # the last part of its ``object``: ``thread.run`` -> ``run``
    fields: frozenset[str]
    listed: bool


def _answer(components: dict[str, Any], schema: dict[str, Any]) -> _Answer | None:
    component = components.get(schema.get("$ref", "").removeprefix(SCHEMAS), {})
    properties = component.get("properties", {})
    items = properties.get("data", {}).get("items", {})
    if "id" not in properties and "$ref" in items:
        inner = _answer(components, items)
        return inner and _Answer("/data/0", inner.name, inner.fields, listed=True)
    if "id" not in properties:
        return None
    name = str(properties.get("object", {}).get("const", "")).rsplit(".", 1)[-1]
    return _Answer("", name, frozenset(properties), listed=False)


def _bind(source: str, answer: _Answer, target: str, parameters: list[str]) -> dict[str, str] | None:
    """Each path parameter of ``target`` from ``source``'s answer or request; ``None`` if one cannot be found."""
    bound: dict[str, str] = {}
    for name in parameters:
        if f"{{{name}}}" in source:
            bound[name] = f"$request.path.{name}"
        elif name == f"{answer.name}_id" or target.startswith(f"{source}/{{{name}}}"):
            bound[name] = f"$response.body#{answer.pointer}/id"
        elif name in answer.fields:
            bound[name] = f"$response.body#{answer.pointer}/{name}"
        else:
            return None
    return bound


def _required_refs(components: dict[str, Any], operation: dict[str, Any]) -> list[str]:
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    component = components.get(schema.get("$ref", "").removeprefix(SCHEMAS), {})
    return [name for name in component.get("required", []) if name.endswith("_id")]


def add_links(document: dict[str, Any], operations: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
    """Add ``links`` to the success answers of ``document`` (see the module)."""
    components = document["components"]["schemas"]
    routes = list(operations)
    for source, _, operation in routes:
        for status, response in operation["responses"].items():
            schema = response.get("content", {}).get("application/json", {}).get("schema", {})
            answer = _answer(components, schema) if status.startswith("2") else None
            if answer is None:
                continue
            links: dict[str, Any] = {}
            for target, method, other in routes:
                bound = _bind(source, answer, target, re.findall(r"{(\w+)}", target))
                if other is operation or bound is None or (answer.listed and method != "get"):
                    continue
                link: dict[str, Any] = {}
                own = f"$response.body#{answer.pointer}/id"
                answered = [value for value in bound.values() if value.startswith("$response")]
                if own in answered or (answered and method == "get"):
                    link["parameters"] = bound
                reference = f"{answer.name}_id"
                if reference in _required_refs(components, other):
                    link["requestBody"] = {reference: own}
                    link["parameters"] = bound
                if link:
                    links[other["operationId"]] = {"operationId": other["operationId"], **link}
            if links:
                response["links"] = links
