"""Server-sent events of a run or a response, replayed from the stored events and followed live by polling the
database.

Each event: ``id: <sequence_number>``, ``event: <dotted name>``, ``data: <JSON with sequence_number>``.
A comment line ``: ping`` every ``PING_S``; the stream ends once its owner is paused or finished and every
event up to then was sent (each front end says how it ends: runs with ``event: done``). Polling the database makes the
fan-out work across API and worker processes without any broker.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from sqlalchemy import select
from sqlmodel import col

from switchyard.platform.db import Database, TenantScope

__all__ = ["PING_S", "POLL_S", "follow_events", "format_event"]

POLL_S = 0.2
PING_S = 10.0


def format_event(sequence_number: int, name: str, data: dict[str, object]) -> bytes:
    payload = json.dumps({**data, "sequence_number": sequence_number}, separators=(",", ":"))
    return f"id: {sequence_number}\nevent: {name}\ndata: {payload}\n\n".encode()


def _stored(row: Any) -> bytes:
    return format_event(row.sequence_number, row.event, row.data)


async def follow_events(
    database: Database,
    scope: TenantScope,
    *,
    owner: Any,
    events: Any,
    events_owner: Any,
    owner_id: str,
    paused: Collection[str],
    starting_after: int = 0,
    poll_s: float = POLL_S,
    ping_s: float = PING_S,
    render: Callable[[Any], bytes] = _stored,
) -> AsyncIterator[bytes]:
    """The stored events of a run or a response (``owner``, its table; ``events``, its events' table, whose column
    ``events_owner`` names it) numbered after ``starting_after``, live until its status is one of ``paused``."""
    last = starting_after
    last_sent = time.monotonic()
    while True:
        async with database.unit_of_work(scope) as session:
            # the status first: events committed with a final status are then certain to be read below
            status = (
                await session.execute(
                    select(col(owner.status)).where(col(owner.tenant_id) == scope.tenant_id, col(owner.id) == owner_id)
                )
            ).scalar_one()
            rows = (
                (
                    await session.execute(
                        select(events)
                        .where(
                            col(events.tenant_id) == scope.tenant_id,
                            col(events_owner) == owner_id,
                            col(events.sequence_number) > last,
                        )
                        .order_by(col(events.sequence_number))
                        .limit(500)
                    )
                )
                .scalars()
                .all()
            )
        for row in rows:
            yield render(row)
            last = row.sequence_number
            last_sent = time.monotonic()
        if len(rows) == 500:
            continue
        if status in paused:
            return
        if time.monotonic() - last_sent >= ping_s:
            yield b": ping\n\n"
            last_sent = time.monotonic()
        await asyncio.sleep(poll_s)
