"""The OpenAPI document describes the server: its error answers, who needs a key, what bodies it takes and sends.

The whole document is checked against the running server by the schemathesis run (``test_schemathesis.py``);
these tests pin the rules that produce it, each on a route where the rule matters.
"""

from __future__ import annotations

import tempfile
from typing import Any

import pytest

from switchyard.platform.app import create_app
from switchyard.platform.settings import Settings

_DOCUMENT: dict[str, Any] = create_app(Settings(data_dir=tempfile.mkdtemp())).openapi_schema.to_schema()
_ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, item in _DOCUMENT["paths"].items() for method, op in item.items()]


def _statuses(method: str, path: str) -> set[int]:
    return {int(code) for code in _DOCUMENT["paths"][path][method]["responses"]}


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if "$ref" in node else []
        return own + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


@pytest.mark.parametrize(("method", "path", "operation"), _operations(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_error_answer_is_the_error_envelope(method: str, path: str, operation: dict[str, Any]) -> None:
    errors = {code: response for code, response in operation["responses"].items() if code[0] in "45"}
    for code, response in errors.items():
        assert response["content"] == {"application/json": {"schema": _ENVELOPE}}, (method, path, code)
        assert response["description"]


def test_the_envelope_is_what_the_server_sends() -> None:
    envelope = _DOCUMENT["components"]["schemas"]["ErrorEnvelope"]
    body = _DOCUMENT["components"]["schemas"][envelope["properties"]["error"]["$ref"].rsplit("/", 1)[1]]
    assert envelope["required"] == ["error"]
    assert set(body["properties"]) == {"message", "type", "param", "code"}


def test_every_reference_resolves() -> None:
    names = set(_DOCUMENT["components"]["schemas"])
    dangling = {ref for ref in _refs(_DOCUMENT) if ref.rsplit("/", 1)[1] not in names}
    assert dangling == set()


def test_an_authenticated_route_lists_401_403_and_503_and_only_what_it_can_answer() -> None:
    assert _statuses("get", "/v1/models") == {200, 401, 403, 503}  # no parameters: no 400, no 404
    assert _statuses("get", "/v1/agents") == {200, 400, 401, 403, 503}  # pagination parameters: 400


def test_a_path_parameter_adds_404_and_a_post_adds_the_idempotency_answers() -> None:
    assert _statuses("get", "/v1/agents/{agent_id}") == {200, 401, 403, 404, 503}
    assert _statuses("post", "/v1/threads") == {201, 400, 401, 403, 409, 413, 422, 503}
    assert {409, 422} <= _statuses("post", "/v1/threads/{thread_id}/runs/{run_id}/cancel")  # a POST without a body


def test_declared_refusals_are_listed() -> None:
    assert {402, 404, 429} <= _statuses("post", "/v1/chat/completions")  # budgets, the model, rate limits
    assert 409 in _statuses("delete", "/v1/threads/{thread_id}")  # a run is active on the thread
    assert 503 in _statuses("get", "/readyz")


def test_every_post_takes_an_idempotency_key() -> None:
    for method, path, operation in _operations():
        headers = {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
        assert ("Idempotency-Key" in headers) == (method == "post"), (method, path)


def test_health_routes_need_no_key_and_every_other_route_does() -> None:
    assert _DOCUMENT["security"] == [{"ApiKey": []}]
    public = {path for method, path, operation in _operations() if operation.get("security") == []}
    assert public == {"/healthz", "/readyz"}
    assert _statuses("get", "/healthz") == {200}
