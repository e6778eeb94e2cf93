"""Items appended to one conversation at the same time all land, at distinct positions with no gap (concurrent
appends answered 500 on both databases: each took the largest position + 1 without a lock)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import select
from sqlmodel import col

from switchyard.platform.app import create_app
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import ConversationItem
from tests.platform.api.live import serve

APPENDS = 45


async def test_45_concurrent_appends_to_one_conversation_all_succeed_at_contiguous_positions(
    client: Any, make_tenant: Any, settings: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    first = [{"type": "message", "role": "user", "content": "first"}]
    created = await client.post("/v1/conversations", json={"items": first}, headers=headers)
    conversation_id = created.json()["id"]

    async def append(http: httpx.AsyncClient, number: int) -> httpx.Response:
        items = [
            {"type": "message", "role": "user", "content": f"append {number} a"},
            {"type": "message", "role": "assistant", "content": f"append {number} b"},
        ]
        return await http.post(f"/v1/conversations/{conversation_id}/items", json={"items": items}, headers=headers)

    with serve(create_app(settings)) as base:  # a real server: each request on a connection of its own
        limits = httpx.Limits(max_connections=APPENDS)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
            answers = await asyncio.gather(*(append(http, number) for number in range(APPENDS)))
    assert [answer.status_code for answer in answers] == [200] * APPENDS, [a.text for a in answers if a.is_error]
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        rows = (
            await session.execute(
                select(ConversationItem)
                .where(col(ConversationItem.conversation_id) == conversation_id)
                .order_by(col(ConversationItem.position))
            )
        ).scalars()
        placed = [(row.position, row.item["content"][0]["text"]) for row in rows]
    assert [position for position, _ in placed] == list(range(1 + 2 * APPENDS))
    assert placed[0][1] == "first"
    for a, b in zip(placed[1::2], placed[2::2], strict=True):  # each append's two items together, in order
        assert (a[1].removesuffix(" a"), b[1].removesuffix(" b")) == (a[1].removesuffix(" a"),) * 2
    listed = await client.get(f"/v1/conversations/{conversation_id}/items?limit=100&order=asc", headers=headers)
    assert len(listed.json()["data"]) == 1 + 2 * APPENDS


async def test_a_response_sees_every_item_of_its_conversation_after_one_was_deleted(
    client: Any, make_tenant: Any
) -> None:
    """The response read its conversation up to position len(items) - 1: after a deletion, it missed the last ones."""
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    long_text = " ".join(f"word{number}" for number in range(400))
    items = [
        {"type": "message", "role": "user", "content": "first"},
        {"type": "message", "role": "user", "content": "second"},
        {"type": "message", "role": "user", "content": long_text},
    ]
    created = await client.post("/v1/conversations", json={"items": items}, headers=headers)
    conversation_id = created.json()["id"]
    listed = await client.get(f"/v1/conversations/{conversation_id}/items?order=asc", headers=headers)
    second = listed.json()["data"][1]["id"]
    deleted = await client.delete(f"/v1/conversations/{conversation_id}/items/{second}", headers=headers)
    assert deleted.status_code == 200, deleted.text
    body = {"model": "meta-llama/Llama-3.1-8B-Instruct", "conversation": conversation_id, "input": "Hi."}
    response = await client.post("/v1/responses", json={**body, "max_output_tokens": 4}, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["input_tokens"] > 400  # the long last item was in the model's input
