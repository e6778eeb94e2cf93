"""Role rules beyond the route guards: no escalation, and a tenant always keeps an owner."""

from __future__ import annotations

from typing import Any


async def test_admin_cannot_mint_or_grant_owner(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    minted = await client.post("/v1/api-keys", json={"role": "owner"}, headers=tenant.headers("admin"))
    assert minted.status_code == 403
    assert minted.json()["error"]["param"] == "role"
    granted = await client.post(
        "/v1/members", json={"email": "e@x.io", "role": "owner"}, headers=tenant.headers("admin")
    )
    assert granted.status_code == 403
    ok = await client.post("/v1/members", json={"email": "e@x.io", "role": "admin"}, headers=tenant.headers("admin"))
    assert ok.status_code == 201


async def test_admin_cannot_revoke_an_owner_key(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    keys = (await client.get("/v1/api-keys?limit=100", headers=tenant.headers())).json()["data"]
    owner_key = next(k for k in keys if k["role"] == "owner")
    response = await client.delete(f"/v1/api-keys/{owner_key['id']}", headers=tenant.headers("admin"))
    assert response.status_code == 403
    assert (await client.get("/v1/members", headers=tenant.headers())).status_code == 200


async def test_last_owner_cannot_be_removed_but_a_second_owner_can(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    owner_id = (await client.get("/v1/members", headers=tenant.headers())).json()["data"][0]["id"]
    refused = await client.delete(f"/v1/members/{owner_id}", headers=tenant.headers())
    assert refused.status_code == 409
    second = await client.post("/v1/members", json={"email": "o2@x.io", "role": "owner"}, headers=tenant.headers())
    assert second.status_code == 201
    removed = await client.delete(f"/v1/members/{owner_id}", headers=tenant.headers())
    assert removed.status_code == 200
    assert removed.json() == {"object": "member.deleted", "id": owner_id, "deleted": True}


async def test_every_mutation_is_audited(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    member = (await client.post("/v1/members", json={"email": "f@x.io"}, headers=tenant.headers())).json()
    await client.patch(f"/v1/members/{member['id']}", json={"role": "admin"}, headers=tenant.headers())
    await client.delete(f"/v1/members/{member['id']}", headers=tenant.headers())
    events = (await client.get("/v1/audit-log?limit=100", headers=tenant.headers())).json()["data"]
    actions = [e["action"] for e in events]
    assert actions[:3] == ["member.delete", "member.update", "member.create"]
    assert actions.count("api_key.create") == 4  # owner key at creation + three role keys
    assert "tenant.create" in actions
    assert all(e["request_id"] for e in events if e["action"].startswith("member."))
