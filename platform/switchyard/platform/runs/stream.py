"""A run's server-sent events (``GET /v1/threads/{id}/runs/{id}/events`` and the streams of run creation), over
the kernel's event follower (``execution/events.py``): the stream ends with ``event: done`` once the run is
finished or waits for the client."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import Database, TenantScope
from switchyard.platform.execution.events import PING_S, POLL_S, follow_events
from switchyard.platform.models import Run, RunEventRecord

__all__ = ["last_event_number", "run_events"]

_PAUSED = {"requires_action", "completed", "failed", "cancelled", "incomplete", "expired"}


async def last_event_number(session: AsyncSession, scope: TenantScope, run_id: str) -> int:
    """The sequence number of the run's last stored event (0 before any): a stream starting after it shows only
    what comes next."""
    statement = select(func.max(col(RunEventRecord.sequence_number))).where(
        col(RunEventRecord.tenant_id) == scope.tenant_id, col(RunEventRecord.run_id) == run_id
    )
    return int((await session.execute(statement)).scalar_one_or_none() or 0)


async def run_events(
    database: Database,
    scope: TenantScope,
    run_id: str,
    *,
    starting_after: int = 0,
    poll_s: float = POLL_S,
    ping_s: float = PING_S,
) -> AsyncIterator[bytes]:
    """Events of the run numbered after ``starting_after``, live until the run pauses or ends."""
    async for chunk in follow_events(
        database,
        scope,
        owner=Run,
        events=RunEventRecord,
        events_owner=RunEventRecord.run_id,
        owner_id=run_id,
        paused=_PAUSED,
        starting_after=starting_after,
        poll_s=poll_s,
        ping_s=ping_s,
    ):
        yield chunk
    yield b"event: done\ndata: [DONE]\n\n"
