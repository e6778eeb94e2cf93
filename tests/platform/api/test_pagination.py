"""Cursor pagination over time-ordered ids: limit, after, before, order."""

from __future__ import annotations

from typing import Any


async def test_pages_walk_forward_and_back_without_gaps_or_repeats(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    for n in range(6):
        created = await client.post("/v1/members", json={"email": f"p{n}@x.io"}, headers=tenant.headers())
        assert created.status_code == 201
    everything = (await client.get("/v1/members?limit=100", headers=tenant.headers())).json()
    all_ids = [m["id"] for m in everything["data"]]
    assert len(all_ids) == 7  # six plus the owner
    assert all_ids == sorted(all_ids, reverse=True)  # newest first by default
    assert everything["has_more"] is False

    seen: list[str] = []
    after = None
    while True:
        query = "limit=3" + (f"&after={after}" if after else "")
        page = (await client.get(f"/v1/members?{query}", headers=tenant.headers())).json()
        assert page["object"] == "list"
        ids = [m["id"] for m in page["data"]]
        assert page["first_id"] == ids[0]
        assert page["last_id"] == ids[-1]
        seen += ids
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert seen == all_ids

    back = (await client.get(f"/v1/members?limit=2&before={all_ids[4]}", headers=tenant.headers())).json()
    assert [m["id"] for m in back["data"]] == all_ids[2:4]
    assert back["has_more"] is True

    ascending = (await client.get("/v1/members?limit=100&order=asc", headers=tenant.headers())).json()
    assert [m["id"] for m in ascending["data"]] == list(reversed(all_ids))


async def test_empty_page(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    page = (await client.get("/v1/audit-log?action=nothing.ever", headers=tenant.headers())).json()
    assert page == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}
