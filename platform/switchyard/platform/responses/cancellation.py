"""Cancelling a background response: asked for by ``POST /v1/responses/{id}/cancel`` (or by deleting it while it
runs), carried out by whichever process drives it.

A queued response that no process holds is cancelled at once. A running one is flagged (``cancel_requested``); the
process driving it notices within ``runs.stop_on_cancel.CANCEL_POLL_S``, even in the middle of a model call, and has
the fleet stop that call: the fleet's receipt bills the tokens generated until then, and the response ends
``cancelled``.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.agents import AgentSpec, RunState
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.db import TenantScope
from switchyard.platform.execution.steps import client_loop
from switchyard.platform.models import ResponseRecord, utc_now
from switchyard.platform.responses.objects import FINISHED

__all__ = ["cancel"]


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
