"""The OpenAPI document describes the server: its error answers, who needs a key, what bodies it takes and sends.

The whole document is checked against the running server by the schemathesis run (``test_schemathesis.py``);
these tests pin the rules that produce it, each on a route where the rule matters.
"""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import ANY

import pytest
from jsonschema import Draft202012Validator

from tests.support.api_schema import openapi_document

_DOCUMENT: dict[str, Any] = openapi_document()
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
    assert _statuses("get", "/v1/agents/{agent_id}") == {200, 400, 401, 403, 404, 503}  # 400: U+0000 in the id
    assert _statuses("post", "/v1/threads") == {201, 400, 401, 403, 408, 409, 413, 422, 503}
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


# ---- request schemas say what the server enforces ----


def _component(name: str) -> dict[str, Any]:
    return dict(_DOCUMENT["components"]["schemas"][name])


def _body_component(method: str, path: str) -> dict[str, Any]:
    (media,) = _DOCUMENT["paths"][path][method]["requestBody"]["content"].values()  # JSON, or an upload's form
    return _component(media["schema"]["$ref"].rsplit("/", 1)[1])


def test_every_request_body_refuses_unknown_fields() -> None:
    bodies = [(m, p) for m, p, op in _operations() if "requestBody" in op]
    assert len(bodies) >= 15
    for method, path in bodies:
        assert _body_component(method, path)["additionalProperties"] is False, (method, path)


def test_an_upload_is_a_form_whose_file_is_binary() -> None:
    content = _DOCUMENT["paths"]["/v1/files"]["post"]["requestBody"]["content"]
    assert set(content) == {"multipart/form-data"}
    form = _body_component("post", "/v1/files")
    assert form["properties"]["file"] == {"type": "string", "format": "binary", "description": ANY}
    assert form["required"] == ["file", "purpose"]
    assert 413 in _statuses("post", "/v1/files")


def test_metadata_is_an_object_of_strings() -> None:
    metadata = _component("ThreadCreate")["properties"]["metadata"]
    assert metadata["type"] == "object"
    assert metadata["additionalProperties"]["type"] == "string"
    assert metadata["maxProperties"] == 16


def test_enforced_patterns_and_bounds_are_declared() -> None:
    assert "@" in _component("MemberCreate")["properties"]["email"]["pattern"]
    assert "@" in _component("TenantCreate")["properties"]["owner_email"]["anyOf"][0]["pattern"]
    events = _DOCUMENT["paths"]["/v1/threads/{thread_id}/runs/{run_id}/events"]["get"]["parameters"]
    assert next(p for p in events if p["name"] == "starting_after")["schema"]["minimum"] == 0  # Litestar drops 0
    assert _component("AgentUpdate")["properties"]["model"]["type"] == "string"  # may be absent, never null


def test_a_tagged_union_requires_its_tag() -> None:
    assert "type" in _component("McpToolSpec")["required"]


def test_text_in_requests_excludes_nul() -> None:
    assert _component("MessageCreate")["properties"]["content"]["pattern"] == "^[^\\u0000]*$"
    path = _DOCUMENT["paths"]["/v1/agents/{agent_id}"]["get"]["parameters"][0]
    assert path["schema"]["pattern"] == "^[^\\u0000]*$"


# ---- answers in every media type the server sends ----


def _content(method: str, path: str, status: str) -> dict[str, Any]:
    return dict(_DOCUMENT["paths"][path][method]["responses"][status]["content"])


def test_chat_completion_answers_a_completion_or_its_chunks_as_server_sent_events() -> None:
    content = _content("post", "/v1/chat/completions", "200")
    assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatCompletion"}
    event = content["text/event-stream"]["schema"]
    data = event["properties"]["data"]["anyOf"]
    assert {"const": "[DONE]"} in data
    assert {"$ref": "#/components/schemas/ChatCompletionChunk"} in data[0]["contentSchema"]["anyOf"]


def test_csv_and_html_answers_are_documented_as_such() -> None:
    assert set(_content("get", "/v1/invoices/{invoice_id}", "200")) == {"application/json", "text/csv", "text/html"}
    assert set(_content("get", "/v1/usage/export.csv", "200")) == {"text/csv"}


def test_a_create_links_to_the_routes_that_use_what_it_made() -> None:
    links = _DOCUMENT["paths"]["/v1/threads"]["post"]["responses"]["201"]["links"]
    assert links["V1ThreadsThreadIdMessagesCreateMessage"]["parameters"] == {"thread_id": "$response.body#/id"}
    run = _DOCUMENT["paths"]["/v1/agents"]["post"]["responses"]["201"]["links"]["V1RunsCreateThreadAndRun"]
    assert run["requestBody"] == {"agent_id": "$response.body#/id"}
    listed = _DOCUMENT["paths"]["/v1/api-keys"]["get"]["responses"]["200"].get("links", {})
    assert "V1ApiKeysKeyIdRevokeApiKey" not in listed  # a list's first item is only read, never revoked


# ---- the server answers what the document says ----


def _assert_conforms(instance: Any, schema: dict[str, Any]) -> None:
    validator = Draft202012Validator({**schema, "components": _DOCUMENT["components"]})  # where its $refs point
    errors = [error.message for error in validator.iter_errors(instance)]
    assert errors == [], errors[:3]


async def test_a_real_completion_and_its_stream_conform(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = {"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "Hi"}]}
    answer = await client.post("/v1/chat/completions", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    _assert_conforms(answer.json(), _content("post", "/v1/chat/completions", "200")["application/json"]["schema"])
    stream_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    streamed = await client.post("/v1/chat/completions", json=stream_body, headers=tenant.headers("developer"))
    event_schema = _content("post", "/v1/chat/completions", "200")["text/event-stream"]["schema"]
    chunk_schema = event_schema["properties"]["data"]["anyOf"][0]["contentSchema"]
    events = [line.removeprefix("data: ") for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    for data in events[:-1]:
        _assert_conforms(json.loads(data), chunk_schema)


async def test_options_lists_every_method_of_the_path(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    for path, methods in [("/v1/members", "GET, OPTIONS, POST"), ("/v1/agents/agent_x", "DELETE, GET, OPTIONS, PATCH")]:
        answer = await client.options(path, headers=tenant.headers())
        assert answer.status_code == 204, answer.text  # was 500: the route guard found no access level
        assert answer.headers["allow"] == methods  # was the methods of one handler only


async def test_a_body_value_keeps_its_json_type(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    refused = await client.post("/v1/budgets", json={"limit_minor": 500, "hard": 0}, headers=tenant.headers())
    assert refused.status_code == 400, refused.text  # 0 is not false (pydantic's lax mode took it)
    assert refused.json()["error"]["param"] == "hard"
    assert (await client.post("/v1/budgets", json={"limit_minor": "500"}, headers=tenant.headers())).status_code == 400
    accepted = await client.post("/v1/budgets", json={"limit_minor": 500.0}, headers=tenant.headers())
    assert accepted.status_code == 201, accepted.text  # 500.0 is the integer 500, in JSON Schema too
    member = await client.post("/v1/members", json={"email": "a@b.io", "role": "viewer"}, headers=tenant.headers())
    assert member.status_code == 201, member.text  # an enum arrives as a JSON string


async def test_a_tool_without_its_type_is_refused_as_documented(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    agent = {"name": "a", "model": "meta-llama/Llama-3.1-8B-Instruct", "tools": [{"name": "lookup"}]}
    answer = await client.post("/v1/agents", json=agent, headers=tenant.headers("developer"))
    assert answer.status_code == 400, answer.text


async def test_a_credit_in_an_unknown_currency_is_refused(client: Any, make_tenant: Any, operator_headers: Any) -> None:
    tenant = await make_tenant()
    grant = {"amount_minor": 500, "currency": "AAA", "reason": "outage"}
    answer = await client.post(f"/v1/admin/tenants/{tenant.id}/credits", json=grant, headers=operator_headers)
    assert answer.status_code == 400, answer.text  # was 201: the tenant's invoices could then not be rendered
    assert answer.json()["error"]["param"] == "currency"
