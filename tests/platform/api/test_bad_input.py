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
