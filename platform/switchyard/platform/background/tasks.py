"""``runs.execute`` and ``responses.execute``: a free worker slot serves the tenant served least recently.

Each message names a job, but a worker taking it serves the next job in turn (``runs.turns.fair_order``): the
oldest job, that can go on now, of the tenant whose job a worker took least recently. So with one worker slot,
tenant X's backlog of ten jobs delays tenant Y's one by at most one of X's jobs, whatever the broker's order. A
message whose own job cannot be taken in turn (waiting for the client, put aside, behind another run of its
thread, leased, finished) first does what it did before for its own job (expire a wait, say, or nothing); when
that takes nothing, the message serves the next job in turn all the same. A job chosen that another worker took
meanwhile is passed over for the next one.

Every job that can go on, or is put aside, always has a message of its own still to come, so none is left to a
sweep: a message whose own job could go on but that serves another job first sends its own job's message again
(to the back of the queue; the next message takes it in turn), and a job put aside was sent for when it may go
on (``execution.worker.run_in_worker``). Counting on the served job's message instead would not hold: that message may
be due only when its job is no longer put aside, or be spent on a job another slot took first, finding nothing
(tenant B's runs waited for a put-aside job's message of tenant A, up to a minute; jobs were left with none).
A message that finds its own job finished, held, put aside or behind another run serves the next job in turn, or
nothing. Runs whose worker died resume through ``runs.resume`` (their own run, ahead of every queue), as before.

A tenant holds at most its share of a worker's slots (``background.shares``): a tenant at its share is passed
over in turn, and a message for its job is parked (sent again for a moment later).
"""

from __future__ import annotations

from celery import current_app, shared_task

from switchyard.platform.background.shares import PARKED_RETRY_S, SHARES
from switchyard.platform.execution.turns import RESPONSE, RUN, Job, can_go_on, fair_order
from switchyard.platform.execution.worker import worker_environment
from switchyard.platform.jobs import enqueue, enqueue_after
from switchyard.platform.responses.executor import EXECUTE_TASK as RESPONSE_TASK
from switchyard.platform.responses.tasks import drive_response_in_worker
from switchyard.platform.runs.dispatch import EXECUTE_TASK as RUN_TASK
from switchyard.platform.runs.tasks import drive_run_in_worker

__all__ = ["NOT_TAKEN", "execute_response_task", "execute_run_task", "serve_in_turn"]

NOT_TAKEN = frozenset({"missing", "finished", "awaiting_client", "behind_another_run", "leased"})
"""What an executor answers for a job it did not take: the slot goes on to the next job in turn."""


@shared_task(name=RUN_TASK)
def execute_run_task(tenant_id: str, run_id: str, swept: bool = False) -> str:
    """Serve the next job in turn; this run when it is the next, or cannot be taken in turn (see the module).
    ``swept``: sent by a sweeper."""
    return serve_in_turn(Job(RUN, tenant_id, run_id), swept=swept)


@shared_task(name=RESPONSE_TASK)
def execute_response_task(tenant_id: str, response_id: str, swept: bool = False) -> str:
    """Serve the next job in turn; this background response when it is the next (see the module). ``swept``:
    sent by a sweeper."""
    return serve_in_turn(Job(RESPONSE, tenant_id, response_id), swept=swept)


def serve_in_turn(sent: Job, *, swept: bool = False) -> str:
    """Drive the next job in turn on this worker thread; what its executor answers. A message is a unit of
    capacity: when its own job needs nothing (finished, held), it serves the next job in turn all the same, so
    that every job keeps a message; when its own job could go on but another goes first, its own job is sent
    again, so that it keeps one; when its tenant holds its share of this worker, it is parked (``shares``),
    unless a sweeper sent it (``swept``) for a job parked here already."""
    key = (sent.tenant_id, sent.id)
    if sent.tenant_id in SHARES.full():
        return _park(sent, swept=swept)
    SHARES.unpark(key)
    loop, env = worker_environment()
    waits = loop.run_until_complete(can_go_on(env.database, sent))
    if not waits:  # (nothing of it can go on: not counted in its tenant's share)
        outcome = _drive(sent)  # what only its own message does: expire a wait, finish a dead process's response
        if outcome not in NOT_TAKEN:
            return outcome
    in_turn = loop.run_until_complete(fair_order(env.database, passing=SHARES.full()))
    outcome = "missing"
    for job in [*in_turn, *([] if sent in in_turn or not waits else [sent])]:
        if waits and job != sent:  # (before driving: the other job may take minutes)
            _send(sent)
            waits = False
        if not SHARES.take(job.tenant_id):  # another slot took the tenant's last one meanwhile
            if waits:  # (then ``job`` is ``sent``)
                return _park(sent, swept=False)
            continue
        try:
            outcome = _drive(job)
        finally:
            SHARES.give_back(job.tenant_id)
        if outcome not in NOT_TAKEN:
            break
    return outcome


def _park(sent: Job, *, swept: bool) -> str:
    """Send ``sent``'s message again for later (its tenant holds its share here), unless a sweeper sent it for
    a job parked here already; "parked" or "parked already"."""
    key = (sent.tenant_id, sent.id)
    if swept and SHARES.parked_here(key):
        return "parked already"
    task = RUN_TASK if sent.kind == RUN else RESPONSE_TASK
    enqueue_after(current_app, task, sent.tenant_id, sent.id, delay_s=PARKED_RETRY_S)
    SHARES.park(key)
    return "parked"


def _send(job: Job) -> None:
    enqueue(current_app, RUN_TASK if job.kind == RUN else RESPONSE_TASK, job.tenant_id, job.id)


def _drive(job: Job) -> str:
    if job.kind == RUN:
        return drive_run_in_worker(job.tenant_id, job.id)
    return drive_response_in_worker(job.tenant_id, job.id)
