"""Celery jobs of background responses: ``responses.recover`` (re-enqueue those whose process died: their lease
passed). ``responses.execute`` (drive one), which serves tenants in turn, is ``switchyard.platform.background``'s.

They drive responses through the kernel on their worker thread (``execution/worker.py``), as runs are. Delivery is
at-least-once: a redelivered ``responses.execute`` finds the response finished or leased and does nothing, or
resumes it from its last checkpoint.
"""

from __future__ import annotations

import logging

from celery import current_app, shared_task

from switchyard.platform.db import Database
from switchyard.platform.execution.recovery import left_behind
from switchyard.platform.execution.worker import run_in_worker, worker_environment
from switchyard.platform.jobs import enqueue
from switchyard.platform.models import ResponseRecord
from switchyard.platform.responses.executor import EXECUTE_TASK, execute_response

__all__ = ["drive_response_in_worker", "recover_responses_task", "responses_to_recover"]

log = logging.getLogger(__name__)


def drive_response_in_worker(tenant_id: str, response_id: str) -> str:
    """Drive the background response on this worker thread to its end (``run_in_worker``). Redelivery: resumes
    from the last checkpoint, or does nothing when it is finished or leased by a live process."""
    _, env = worker_environment()
    work = execute_response(env, tenant_id=tenant_id, response_id=response_id)
    return run_in_worker(work, tenant_id, response_id, resume=EXECUTE_TASK, later=EXECUTE_TASK)


async def responses_to_recover(database: Database, *, grace_s: float) -> list[tuple[str, str]]:
    """Unfinished responses left behind, as ``(tenant_id, response_id)`` pairs: their process died (foreground
    ones too: their client is gone, but a worker finishes them and their books), put aside for admission and not
    taken ``grace_s`` after their time (their worker sent them for then, should that message be lost), or never
    taken ``grace_s`` after they were created (the message that should have started them was lost)."""
    rows = await left_behind(
        database,
        ResponseRecord,
        active=("queued", "in_progress"),
        set_aside_grace_s=grace_s,
        never_picked_up_grace_s=grace_s,
    )
    return [(tenant_id, response_id) for tenant_id, response_id, _, _ in rows]


@shared_task(name="responses.recover", ignore_result=True)
def recover_responses_task() -> int:
    """Re-enqueue responses left behind: their process died, or the message that should start them went missing
    (a lease after their time, or after their creation). Redelivery: at worst one is enqueued twice; the lease
    lets one process in."""
    loop, env = worker_environment()
    due = loop.run_until_complete(responses_to_recover(env.database, grace_s=env.lease_s))
    for tenant_id, response_id in due:
        enqueue(current_app, EXECUTE_TASK, tenant_id, response_id, True)  # swept: dropped for one parked there
    if due:
        log.info("resuming %d responses whose process died", len(due))
    return len(due)
