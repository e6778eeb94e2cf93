"""Celery jobs of background responses: ``responses.recover`` (re-enqueue those whose process died: their lease
passed). ``responses.execute`` (drive one), which serves tenants in turn, is ``switchyard.platform.background``'s.

They share the run jobs' per-thread environment (event loop, database, pool, admission). Delivery is
at-least-once: a redelivered ``responses.execute`` finds the response finished or leased and does nothing, or
resumes it from its last checkpoint.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import current_app, shared_task
from sqlalchemy import or_, select
from sqlmodel import col

from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.jobs import enqueue
from switchyard.platform.models import ResponseRecord, utc_now
from switchyard.platform.responses.executor import EXECUTE_TASK, execute_response
from switchyard.platform.runs.tasks import run_in_worker, worker_environment

__all__ = ["drive_response_in_worker", "recover_responses_task", "responses_to_recover"]

log = logging.getLogger(__name__)


def drive_response_in_worker(tenant_id: str, response_id: str) -> str:
    """Drive the background response on this worker thread to its end (``run_in_worker``). Redelivery: resumes
    from the last checkpoint, or does nothing when it is finished or leased by a live process."""
    _, env = worker_environment()
    work = execute_response(env, tenant_id=tenant_id, response_id=response_id)
    return run_in_worker(work, tenant_id, response_id, resume=EXECUTE_TASK, later=EXECUTE_TASK)


async def responses_to_recover(database: Database, *, set_aside_grace_s: float = 0.0) -> list[tuple[str, str]]:
    """Unfinished responses whose lease passed (their process died), as ``(tenant_id, response_id)`` pairs;
    foreground ones too: their client is gone, but a worker finishes them (and their books). A response put
    aside for admission (no holder) only once its time passed by ``set_aside_grace_s``: its worker sent it for
    then, and this finds it should that message be lost."""
    now = utc_now()
    died = col(ResponseRecord.lease_owner).is_not(None)
    set_aside_passed = col(ResponseRecord.lease_expires_at) < now - timedelta(seconds=set_aside_grace_s)
    async with database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(
            select(col(ResponseRecord.tenant_id), col(ResponseRecord.id))
            .where(
                col(ResponseRecord.status).in_(("queued", "in_progress")),
                col(ResponseRecord.lease_expires_at) < now,
                or_(died, set_aside_passed),
            )
            .order_by(col(ResponseRecord.id))
            .limit(1000)
        )
        return [(tenant_id, response_id) for tenant_id, response_id in rows.all()]


@shared_task(name="responses.recover", ignore_result=True)
def recover_responses_task() -> int:
    """Re-enqueue responses whose process died, and those put aside whose message went missing (a lease after
    their time). Redelivery: at worst one is enqueued twice; the lease lets one process in."""
    loop, env = worker_environment()
    due = loop.run_until_complete(responses_to_recover(env.database, set_aside_grace_s=env.lease_s))
    for tenant_id, response_id in due:
        enqueue(current_app, EXECUTE_TASK, tenant_id, response_id, True)  # swept: dropped for one parked there
    if due:
        log.info("resuming %d responses whose process died", len(due))
    return len(due)
