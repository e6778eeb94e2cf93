"""Messages added to one thread at the same time all land, at distinct positions with no gap (each took the largest
position + 1 with no lock: concurrent adds collided on the thread's position constraint, a 500)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import select
from sqlmodel import col

from switchyard.platform.app import create_app
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import ThreadMessage
from tests.platform.api.live import serve

ADDS = 45


async def test_45_concurrent_messages_to_one_thread_all_land_at_contiguous_positions(
    client: Any, make_tenant: Any, settings: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    thread = await client.post(
        "/v1/threads", json={"messages": [{"role": "user", "content": "first"}]}, headers=headers
    )
    assert thread.status_code == 201, thread.text
    thread_id = thread.json()["id"]

    async def add(http: httpx.AsyncClient, number: int) -> httpx.Response:
        message = {"role": "user", "content": f"message {number}"}
        return await http.post(f"/v1/threads/{thread_id}/messages", json=message, headers=headers)

    with serve(create_app(settings)) as base:  # a real server: each request on a connection of its own
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=httpx.Limits(max_connections=ADDS)) as http:
            answers = await asyncio.gather(*(add(http, number) for number in range(ADDS)))
    assert [answer.status_code for answer in answers] == [201] * ADDS, [a.text for a in answers if a.is_error][:3]
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(
            select(col(ThreadMessage.position))
            .where(col(ThreadMessage.thread_id) == thread_id)
            .order_by(col(ThreadMessage.position))
        )
        assert list(rows.scalars()) == list(range(1 + ADDS))
