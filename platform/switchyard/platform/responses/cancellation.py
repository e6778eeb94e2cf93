"""Cancelling a background response: asked for by ``POST /v1/responses/{id}/cancel`` (or by deleting it while it
runs), carried out by whichever process drives it.

A queued response that no process holds is cancelled at once. A running one is flagged (``cancel_requested``); the
process driving it notices within :data:`CANCEL_POLL_S`, even in the middle of a model call, and has the fleet stop
that call: the fleet's receipt bills the tokens generated until then, and the response ends ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.agents import AgentSpec, Model, ModelRequest, ModelResponse, RunState
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.db import TenantScope
from switchyard.platform.models import ResponseRecord, utc_now
from switchyard.platform.responses.objects import FINISHED
from switchyard.platform.runs.persist import client_loop

__all__ = ["CANCEL_POLL_S", "StopsOnCancel", "cancel"]

log = logging.getLogger(__name__)

CANCEL_POLL_S = 0.5
"""How often the process driving a background response reads its ``cancel_requested`` during a model call."""


async def cancel(session: AsyncSession, scope: TenantScope, row: ResponseRecord) -> None:
    """Cancel the background response ``row`` (a finished one is left as it is); the caller commits."""
    if row.status in FINISHED:
        return
    row.cancel_requested = True
    if row.status != "queued" or row.lease_owner is not None:
        return  # its process stops it
    state = RunState.model_validate(row.state)
    cancelled = client_loop(AgentSpec.model_validate(row.request["spec"])).cancel(state, now_ms=wall_clock_ms())
    claimed = await session.execute(
        update(ResponseRecord)
        .where(
            col(ResponseRecord.tenant_id) == scope.tenant_id,
            col(ResponseRecord.id) == row.id,
            col(ResponseRecord.revision) == row.revision,
            col(ResponseRecord.lease_owner).is_(None),
        )
        .values(
            state=cancelled.to_json(),
            revision=cancelled.revision,
            status="cancelled",
            cancel_requested=True,
            updated_at=utc_now(),
        )
        .execution_options(synchronize_session=False)
    )
    if claimed.rowcount == 1:  # type: ignore[attr-defined]
        await session.refresh(row)


class StopsOnCancel:
    """A background response's model: while a call runs, reads the response's cancel flag every
    :data:`CANCEL_POLL_S` and, once it is set, has the fleet stop the call (``stop``, with the call's request id).
    The call then ends early with the fleet's receipt of what it generated (``finish_reason: "cancelled"``)."""

    def __init__(
        self,
        inner: Model,
        *,
        cancel_requested: Callable[[], Awaitable[bool]],
        stop: Callable[[str], None],
        poll_s: float = CANCEL_POLL_S,
    ) -> None:
        self.inner = inner
        self.cancel_requested = cancel_requested
        self.stop = stop
        self.poll_s = poll_s

    async def request(self, request: ModelRequest) -> ModelResponse:
        watcher = asyncio.get_running_loop().create_task(self._watch(request.request_id))
        try:
            return await self.inner.request(request)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch(self, request_id: str) -> None:
        flagged = False
        while True:
            await asyncio.sleep(self.poll_s)
            if not flagged:
                try:
                    flagged = await self.cancel_requested()
                except Exception:  # the next poll reads it again; the run loop reads it between steps too
                    log.warning("could not read whether %s is cancelled", request_id, exc_info=True)
            if flagged:  # again at every poll: a call the fleet had not registered yet is stopped once it has
                self.stop(request_id)
