"""When a key last authenticated a request (``last_used_at``), written at most once a minute per key.

The authentication middleware notes each verified key; the write happens in a task of its own after that, off
the request's path, and a failed write is logged and never fails the request. Two guards keep it to one write
a minute: this process remembers when it last wrote each key (no statement at all within the minute), and the
``UPDATE`` itself only moves a ``last_used_at`` older than a minute (so several API processes do not each write).
The column is therefore exact to the minute, not to the request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import or_, update
from sqlmodel import col

from switchyard.platform.auth.principal import Principal
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.models import ApiKey, OperatorKey, utc_now

__all__ = ["TOUCH_AFTER", "KeyUseRecorder"]

log = logging.getLogger(__name__)

TOUCH_AFTER = timedelta(minutes=1)
_MAX_REMEMBERED = 50_000  # keys whose last write this process remembers (the key cache's bound)


class KeyUseRecorder:
    """Writes keys' ``last_used_at`` in the background, at most once per key per ``TOUCH_AFTER``."""

    def __init__(self, database: Database, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._database = database
        self._clock = clock
        self._written_at: dict[str, float] = {}  # key id -> this process's clock at its last write
        self._pending: set[asyncio.Task[None]] = set()

    def note(self, principal: Principal) -> None:
        """``principal``'s key authenticated a request now; schedule its write unless one is a minute fresh."""
        now = self._clock()
        last = self._written_at.get(principal.key_id)
        if last is not None and now - last < TOUCH_AFTER.total_seconds():
            return
        if len(self._written_at) >= _MAX_REMEMBERED:
            self._written_at.clear()
        self._written_at[principal.key_id] = now
        task = asyncio.get_running_loop().create_task(self._write(principal))
        self._pending.add(task)  # a strong reference until it ends (the loop keeps only weak ones)
        task.add_done_callback(self._pending.discard)

    async def _write(self, principal: Principal) -> None:
        now = utc_now()
        table = OperatorKey if principal.is_operator else ApiKey
        statement = (
            update(table)
            .where(
                col(table.id) == principal.key_id,
                or_(col(table.last_used_at).is_(None), col(table.last_used_at) <= now - TOUCH_AFTER),
            )
            .values(last_used_at=now)
        )
        try:
            # A tenant key is written in its own tenant's scope (row-level security applies); operator keys are
            # nobody's.
            async with self._database.unit_of_work(principal.scope or UNSCOPED) as session:
                await session.execute(statement)
        except Exception:
            self._written_at.pop(principal.key_id, None)  # the next request tries again
            log.warning("recording the last use of key %s failed", principal.key_id, exc_info=True)

    async def drain(self) -> None:
        """Wait for the writes under way (at shutdown, and in tests that read the column).

        It polls rather than awaits the tasks, so it also works from another event loop (a test client's).
        """
        while self._pending:  # noqa: ASYNC110 (an Event belongs to one loop; the writes may run on another)
            await asyncio.sleep(0.005)
