"""Bad input gets a clear 4xx in the error envelope and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest


async def _state(client: Any, tenant: Any) -> tuple[int, int, int]:
    """Counts that any accidental write would change: members, keys, audit events."""
    counts = []
    for path in ("/v1/members", "/v1/api-keys", "/v1/audit-log"):
        response = await client.get(path, params={"limit": 100}, headers=tenant.headers())
        counts.append(len(response.json()["data"]))
    return counts[0], counts[1], counts[2]


@pytest.mark.parametrize(
    ("path", "body", "param", "code"),
    [
        ("/v1/members", b'{"email": "a@b.co"', None, "invalid_json"),
        ("/v1/members", b"[1, 2]", None, "invalid_value"),
        ("/v1/members", b'{"email": 42}', "email", "invalid_value"),
        ("/v1/members", b'{"email": "not-an-email"}', "email", "invalid_value"),
        ("/v1/members", b'{"email": "a@b.co", "role": "emperor"}', "role", "invalid_value"),
        ("/v1/members", b'{"email": "a@b.co", "is_admin": true}', "is_admin", "invalid_value"),
        ("/v1/api-keys", b'{"role": "viewer", "expires_at": "yesterday"}', "expires_at", "invalid_value"),
        ("/v1/api-keys", b'{"role": "viewer", "expires_at": "2001-01-01T00:00:00Z"}', "expires_at", "invalid_value"),
        ("/v1/api-keys", b'{"scopes": ["all"]}', "scopes", "invalid_value"),
    ],
)
async def test_bad_bodies_are_400_and_change_nothing(
    client: Any, make_tenant: Any, path: str, body: bytes, param: str | None, code: str
) -> None:
    tenant = await make_tenant()
    before = await _state(client, tenant)
    headers = {**tenant.headers(), "content-type": "application/json"}
    response = await client.post(path, content=body, headers=headers)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    assert error["param"] == param
    if param:
        assert param in error["message"]
    assert await _state(client, tenant) == before


async def test_oversized_body_is_413_and_changes_nothing(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    before = await _state(client, tenant)
    huge = b'{"email": "a@b.co", "role": "viewer", "pad": "' + b"x" * 2_000_000 + b'"}'
    headers = {**tenant.headers(), "content-type": "application/json"}
    response = await client.post("/v1/members", content=huge, headers=headers)
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "request_too_large"
    with_key = await client.post("/v1/members", content=huge, headers={**headers, "Idempotency-Key": "big"})
    assert with_key.status_code == 413
    assert await _state(client, tenant) == before


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "limit=abc", "order=sideways"])
async def test_bad_pagination_parameters_are_400(client: Any, make_tenant: Any, query: str) -> None:
    tenant = await make_tenant()
    response = await client.get(f"/v1/members?{query}", headers=tenant.headers())
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == query.split("=")[0]


async def test_wrong_method_is_405_in_the_envelope(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    response = await client.put("/v1/members", json={}, headers=tenant.headers())
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


async def test_failed_mutation_rolls_back_with_its_audit_row(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    owner_id = (await client.get("/v1/members", headers=tenant.headers())).json()["data"][0]["id"]
    before = await _state(client, tenant)
    response = await client.patch(f"/v1/members/{owner_id}", json={"role": "viewer"}, headers=tenant.headers())
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "last_owner"
    assert await _state(client, tenant) == before


# ---- JSON nested too deep: refused before it is decoded, on every route ----


def _depth(value: Any) -> int:
    """Containers nested in ``value`` (``{}`` is 1, ``{"a": []}`` is 2)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _deep_list(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def _deep_object(levels: int) -> bytes:
    return b'{"a":' * (levels - 1) + b"{}" + b"}" * (levels - 1)


_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _deep_bodies(levels: int) -> list[tuple[str, bytes]]:
    """Each kind of body with something ``levels`` deep where the route takes free-form JSON (or where it does not)."""
    obj = _deep_object(levels)
    return [
        ("/v1/members", b'{"email": "a@b.co", "role": ' + _deep_list(levels) + b"}"),
        ("/v1/threads", b'{"metadata": ' + obj + b"}"),
        (
            "/v1/chat/completions",
            b'{"model": "' + _MODEL.encode() + b'", "messages": [{"role": "user", "content": "hi"}], '
            b'"tools": [{"type": "function", "function": {"name": "f", "parameters": ' + obj + b"}}]}",
        ),
        (
            "/v1/agents",
            b'{"name": "a", "model": "' + _MODEL.encode() + b'", "tools": [{"type": "function", "name": "f", '
            b'"parameters": ' + obj + b"}]}",
        ),
        ("/v1/runs", b'{"agent_id": "agent_x", "thread": {"metadata": ' + obj + b"}}"),
        ("/v1/budgets", _deep_list(levels)),
    ]


@pytest.mark.parametrize("levels", [65, 1_000, 100_000])
@pytest.mark.parametrize("idempotent", [False, True])
async def test_json_nested_too_deep_is_400_on_every_kind_of_route(
    client: Any, make_tenant: Any, levels: int, idempotent: bool
) -> None:
    tenant = await make_tenant()
    before = await _state(client, tenant)
    for path, body in _deep_bodies(levels):
        headers = {**tenant.headers(), "content-type": "application/json"}
        if idempotent:
            headers["Idempotency-Key"] = f"deep-{path}"
        response = await client.post(path, content=body, headers=headers)
        assert response.status_code == 400, (path, response.text[:300])
        error = response.json()["error"]
        assert error["code"] == "json_too_deep", (path, error)
        assert "64" in error["message"]
    assert await _state(client, tenant) == before


async def test_json_nested_too_deep_is_400_on_operator_routes(client: Any, operator_headers: Any) -> None:
    headers = {**operator_headers, "content-type": "application/json"}
    response = await client.post("/v1/admin/tenants", content=b'{"name": ' + _deep_list(5_000) + b"}", headers=headers)
    assert response.status_code == 400, response.text[:300]
    assert response.json()["error"]["code"] == "json_too_deep"


def _schema_chain(links: int, innermost: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema of objects nested ``links`` properties deep around ``innermost``."""
    schema = innermost
    for _ in range(links):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


async def test_nesting_limit_is_64_levels(client: Any, make_tenant: Any) -> None:
    """A tool schema 64 containers deep (counting the body itself) is accepted; one level more is refused."""
    tenant = await make_tenant()
    for leaf, depth, status in [({}, 64, 201), ({"enum": [1]}, 65, 400)]:
        schema = _schema_chain(29, {"type": "object", "properties": {"x": leaf}})
        body = {"name": "deep", "model": _MODEL, "tools": [{"type": "function", "name": "f", "parameters": schema}]}
        assert _depth(body) == depth
        response = await client.post("/v1/agents", json=body, headers=tenant.headers("developer"))
        assert response.status_code == status, response.text[:300]
    assert response.json()["error"]["code"] == "json_too_deep"


async def test_brackets_inside_strings_do_not_count_as_nesting(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    content = '[{"\\"' * 500 + "quoted brackets are text" + "]}" * 500
    response = await client.post(
        "/v1/threads", json={"messages": [{"content": content}]}, headers=tenant.headers("developer")
    )
    assert response.status_code == 201, response.text[:300]
    messages = (await client.get(f"/v1/threads/{response.json()['id']}/messages", headers=tenant.headers())).json()
    assert messages["data"][0]["content"] == content


# ---- an empty body says so ----


@pytest.mark.parametrize("body", [b"", b" \n\t"])
@pytest.mark.parametrize("path", ["/v1/members", "/v1/api-keys", "/v1/threads", "/v1/agents", "/v1/chat/completions"])
async def test_an_empty_body_is_400_missing_body(client: Any, make_tenant: Any, path: str, body: bytes) -> None:
    tenant = await make_tenant()
    before = await _state(client, tenant)
    headers = {**tenant.headers(), "content-type": "application/json"}
    response = await client.post(path, content=body, headers=headers)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "missing_body"
    assert error["param"] is None
    assert "body is empty" in error["message"]
    assert await _state(client, tenant) == before


# ---- times: aware, and within 1970..9999-01-01 ----

_YEAR_10000 = 253_402_300_800  # 10000-01-01T00:00:00Z in Unix seconds


_OUT_OF_RANGE = [
    f"start_time={_YEAR_10000}",
    f"start_time=0&end_time={_YEAR_10000}",
    f"end_time={10**30}",
    "start_time=253370764801",  # one second past 9999-01-01
    "start_time=" + "9" * 5000,
]
_BAD_PAGES = [f"page={_YEAR_10000}", f"page={10**30}", "page=\u00b2", "page=abc"]  # ² is a digit to isdigit()
_BAD_PAGES.append("page=" + "9" * 5000)  # past int()'s 4,300 digits: a ValueError


@pytest.mark.parametrize(
    ("path", "query"),
    [("/v1/usage", q) for q in _OUT_OF_RANGE + _BAD_PAGES] + [("/v1/usage/export.csv", q) for q in _OUT_OF_RANGE],
)
async def test_usage_times_out_of_range_are_400_naming_the_parameter(
    client: Any, make_tenant: Any, path: str, query: str
) -> None:
    tenant = await make_tenant()
    response = await client.get(f"{path}?{query}", headers=tenant.headers("viewer"))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    name = query.split("&")[-1].split("=")[0]
    assert error["param"] == name, error
    assert error["code"] == "invalid_value"
    assert name in error["message"]


async def test_usage_up_to_the_latest_time_is_answered(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    latest = 253_370_764_800  # 9999-01-01T00:00:00Z
    page = await client.get(
        f"/v1/usage?start_time={latest - 3 * 86_400}&end_time={latest}", headers=tenant.headers("viewer")
    )
    assert page.status_code == 200, page.text
    assert len(page.json()["data"]) == 3
    follow = await client.get(f"/v1/usage?page={latest - 86_400}&end_time={latest}", headers=tenant.headers("viewer"))
    assert follow.status_code == 200, follow.text
    export = await client.get(f"/v1/usage/export.csv?start_time={latest - 86_400}", headers=tenant.headers("viewer"))
    assert export.status_code == 400  # the window ends now, before it starts
    assert export.json()["error"]["param"] == "end_time"


@pytest.mark.parametrize(
    ("expires_at", "problem"),
    [
        ("2030-01-01T00:00:00", "timezone"),
        ("2030-01-01", "timezone"),
        ("9999-12-31T23:00:00-05:00", "9999-01-01"),  # past the end of datetime once in UTC
        ("9999-06-01T00:00:00Z", "9999-01-01"),
    ],
)
async def test_api_key_expiry_must_be_an_aware_time_in_range(
    client: Any, make_tenant: Any, expires_at: str, problem: str
) -> None:
    tenant = await make_tenant()
    before = await _state(client, tenant)
    response = await client.post(
        "/v1/api-keys", json={"role": "viewer", "expires_at": expires_at}, headers=tenant.headers()
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("expires_at", "invalid_value")
    assert problem in error["message"]
    assert await _state(client, tenant) == before


async def test_api_key_expiry_with_an_offset_is_stored_in_utc(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    response = await client.post(
        "/v1/api-keys", json={"role": "viewer", "expires_at": "2030-01-01T02:00:00+02:00"}, headers=tenant.headers()
    )
    assert response.status_code == 201, response.text
    assert response.json()["expires_at"] == "2030-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("effective_from", "problem"),
    [
        ("2031-01-01T00:00:00", "timezone"),
        ("9999-12-31T23:00:00-05:00", "9999-01-01"),
        ("9999-12-31T23:00:00Z", "9999-01-01"),
    ],
)
async def test_rate_card_start_must_be_an_aware_time_in_range(
    client: Any, operator_headers: Any, effective_from: str, problem: str
) -> None:
    body = {"instance_type": "trn2.48xlarge", "price_per_chip_hour": "1.5", "effective_from": effective_from}
    response = await client.post("/v1/admin/rate-cards", json=body, headers=operator_headers)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("effective_from", "invalid_value")
    assert problem in error["message"]


# ---- parameters are named as the client sent them; text responses have one charset ----


async def test_invoice_format_errors_name_format(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    response = await client.get("/v1/invoices/inv_none?format=pdf", headers=tenant.headers())
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "format"
    assert error["message"].startswith("invalid request: format: ")


async def test_text_responses_carry_one_charset(client: Any, make_tenant: Any) -> None:
    from tests.platform.billing.factories import make_invoice

    tenant = await make_tenant()
    invoice_id = await make_invoice(client, tenant)
    for path, media_type in [
        (f"/v1/invoices/{invoice_id}?format=csv", "text/csv"),
        (f"/v1/invoices/{invoice_id}?format=html", "text/html"),
        ("/v1/usage/export.csv", "text/csv"),
    ]:
        response = await client.get(path, headers=tenant.headers())
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == f"{media_type}; charset=utf-8"


# ---- a budget must apply to something of the caller's tenant ----


async def _agent_id(client: Any, tenant: Any) -> str:
    response = await client.post("/v1/agents", json={"name": "a", "model": _MODEL}, headers=tenant.headers())
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _key_id(client: Any, tenant: Any) -> str:
    response = await client.post("/v1/api-keys", json={"role": "viewer"}, headers=tenant.headers())
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def test_budget_scope_ids_must_be_live_keys_and_agents_of_the_tenant(client: Any, make_tenant: Any) -> None:
    tenant, other = await make_tenant(), await make_tenant()
    revoked = await _key_id(client, tenant)
    assert (await client.delete(f"/v1/api-keys/{revoked}", headers=tenant.headers())).status_code == 200
    deleted = await _agent_id(client, tenant)
    assert (await client.delete(f"/v1/agents/{deleted}", headers=tenant.headers())).status_code == 200
    refused = [
        ("api_key", await _key_id(client, other), "not an API key of this tenant"),
        ("agent", await _agent_id(client, other), "not an agent of this tenant"),
        ("api_key", "key_01nosuchkey00000000000000", "not an API key of this tenant"),
        ("agent", "agent_01nosuchagent000000000000", "not an agent of this tenant"),
        ("api_key", revoked, "revoked"),
        ("agent", deleted, "not an agent of this tenant"),
        ("api_key", "", "required"),
        ("agent", "", "required"),
        ("tenant", await _key_id(client, tenant), "must be empty"),
    ]
    before = await _state(client, tenant)
    for kind, scope_id, problem in refused:
        body = {"limit_minor": 100, "scope": kind, "scope_id": scope_id}
        response = await client.post("/v1/budgets", json=body, headers=tenant.headers())
        assert response.status_code == 400, (kind, scope_id, response.text)
        error = response.json()["error"]
        assert (error["param"], error["code"]) == ("scope_id", "invalid_value")
        assert problem in error["message"]
    assert await _state(client, tenant) == before
    assert (await client.get("/v1/budgets", headers=tenant.headers())).json()["data"] == []

    for kind, scope_id in [("api_key", await _key_id(client, tenant)), ("agent", await _agent_id(client, tenant))]:
        body = {"limit_minor": 100, "scope": kind, "scope_id": scope_id}
        response = await client.post("/v1/budgets", json=body, headers=tenant.headers())
        assert response.status_code == 201, response.text
        assert response.json()["scope_id"] == scope_id


# ---- NUL (U+0000) in text: PostgreSQL cannot store or compare it (a 500 there), SQLite could ----


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/threads", {"messages": [{"content": "a\x00b"}]}, "messages.0.content"),
        ("/v1/api-keys", {"name": "a\x00b"}, "name"),
        ("/v1/threads", {"metadata": {"k\x00": "v"}}, "metadata"),
        ("/v1/agents", {"name": "a", "model": _MODEL, "instructions": "\x00"}, "instructions"),
        (
            "/v1/chat/completions",
            {"model": _MODEL, "messages": [{"role": "user", "content": "\x00"}]},
            "messages.0.content",
        ),
    ],
)
async def test_nul_in_body_text_is_400_naming_the_field(
    client: Any, make_tenant: Any, path: str, body: dict[str, Any], param: str
) -> None:
    tenant = await make_tenant()
    before = await _state(client, tenant)
    response = await client.post(path, json=body, headers=tenant.headers())
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (param, "invalid_value")
    assert "NUL" in error["message"]
    assert await _state(client, tenant) == before


async def test_an_escaped_backslash_before_u0000_is_text(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    content = "a \\u0000 in a string is six characters"
    created = await client.post("/v1/threads", json={"messages": [{"content": content}]}, headers=tenant.headers())
    assert created.status_code == 201, created.text
    messages = await client.get(f"/v1/threads/{created.json()['id']}/messages", headers=tenant.headers())
    assert messages.json()["data"][0]["content"] == content


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/v1/members/mem_a%00b", "member_id"),
        ("/v1/agents/agent_%00", "agent_id"),
        ("/v1/threads/thread_%00/messages", "thread_id"),
        ("/v1/invoices/inv_%00", "invoice_id"),
        ("/v1/audit-log?action=a%00b", "action"),
        ("/v1/members?after=mem_%00", "after"),
        ("/v1/admin/tenants/ten_%00", "tenant_id"),
        ("/v1/admin/rate-cards?instance_type=trn2%00", "instance_type"),
    ],
)
async def test_nul_in_path_or_query_parameters_is_400_naming_them(
    client: Any, make_tenant: Any, operator_headers: Any, path: str, param: str
) -> None:
    tenant = await make_tenant()
    headers = operator_headers if path.startswith("/v1/admin") else tenant.headers()
    response = await client.get(path, headers=headers)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (param, "invalid_value")


# ---- run events: sequence numbers fit their column; agents' approval wait fits a datetime ----


async def test_event_cursors_out_of_range_are_400(client: Any, make_tenant: Any) -> None:
    from tests.platform.api.test_isolation_matrix import FACTORIES

    tenant = await make_tenant()
    thread_id = await FACTORIES["thread_id"](client, tenant)
    run_id = await FACTORIES["run_id"](client, tenant)
    url = f"/v1/threads/{thread_id}/runs/{run_id}/events"
    assert (await client.get(url, params={"starting_after": 2**31 - 1}, headers=tenant.headers())).status_code == 200
    for params, headers, param in [
        ({"starting_after": 2**31}, {}, "starting_after"),
        ({"starting_after": 10**30}, {}, "starting_after"),
        ({}, {"last-event-id": str(2**31)}, "last-event-id"),
        ({}, {"last-event-id": b"\xb2"}, "last-event-id"),  # '²': a digit to str.isdigit(), not to int()
        ({}, {"last-event-id": "-1"}, "last-event-id"),
        ({}, {"last-event-id": "9" * 5000}, "last-event-id"),  # past int()'s 4,300 digits: a ValueError
    ]:
        response = await client.get(url, params=params, headers={**tenant.headers(), **headers})
        assert response.status_code == 400, (params, headers, response.text)
        error = response.json()["error"]
        assert (error["param"], error["code"]) == (param, "invalid_value")


async def test_approval_wait_is_at_most_seven_days(client: Any, make_tenant: Any) -> None:
    """A longer wait put the run's ``expires_at`` past the end of datetime: reading the run was a 500."""
    tenant = await make_tenant()
    for ttl, status in [(604_800, 201), (604_801, 400), (1e15, 400)]:
        body = {"name": "a", "model": _MODEL, "limits": {"requires_action_ttl_s": ttl}}
        response = await client.post("/v1/agents", json=body, headers=tenant.headers())
        assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == "limits.requires_action_ttl_s"


@pytest.mark.parametrize("version", [2**31, 2**63, 10**30])
async def test_an_agent_version_past_32_bits_is_400(client: Any, make_tenant: Any, version: int) -> None:
    tenant = await make_tenant()
    agent_id = await _agent_id(client, tenant)
    for path in ("/v1/runs", f"/v1/threads/{await _thread_id(client, tenant)}/runs"):
        response = await client.post(
            path, json={"agent_id": agent_id, "agent_version": version}, headers=tenant.headers()
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == "agent_version"


async def _thread_id(client: Any, tenant: Any) -> str:
    response = await client.post("/v1/threads", json={}, headers=tenant.headers())
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
