"""Celery jobs of runs: ``runs.resume`` (drive one run whose worker died), ``runs.recover`` (re-enqueue runs whose
worker died, as ``runs.resume``) and ``runs.sweep`` (re-enqueue runs never picked up, and runs put aside for
admission whose time passed, should their worker's message be lost; expire waits past their deadline).
``runs.execute`` itself, which serves tenants in turn, is ``switchyard.platform.background``'s.

Each drives runs through the kernel on its worker thread (``execution/worker.py``). Delivery is at-least-once: a
redelivered ``runs.resume`` finds the run finished, waiting for the client, or leased, and does nothing; otherwise it
resumes from the last checkpoint.
"""

from __future__ import annotations

import logging

from celery import current_app, shared_task

from switchyard.platform.db import Database
from switchyard.platform.execution.recovery import LeftBehind, left_behind
from switchyard.platform.execution.worker import run_in_worker, run_on_worker_loop, worker_environment
from switchyard.platform.jobs import enqueue
from switchyard.platform.models import Run, utc_now
from switchyard.platform.runs.dispatch import EXECUTE_TASK, RESUME_TASK
from switchyard.platform.runs.executor import execute_run

__all__ = [
    "drive_run_in_worker",
    "recover_task",
    "resume_run_task",
    "runs_to_recover",
    "sweep_runs",
    "sweep_task",
]

log = logging.getLogger(__name__)


@shared_task(name="runs.resume")
def resume_run_task(tenant_id: str, run_id: str) -> str:
    """Drive a run whose worker died (this run, not the next in turn: ``runs.execute`` serves tenants in turn),
    sent by ``runs.recover`` to the queue workers take first, so it resumes ahead of every queued run.
    Redelivery: resumes from the last checkpoint, or does nothing when the run is finished, waiting, or leased."""
    return drive_run_in_worker(tenant_id, run_id)


def drive_run_in_worker(tenant_id: str, run_id: str) -> str:
    """Drive the run on this worker thread (``run_in_worker``); what ``execute_run`` answers, or why it stopped."""
    _, env = worker_environment()
    work = execute_run(env, tenant_id=tenant_id, run_id=run_id)
    return run_in_worker(work, tenant_id, run_id, resume=RESUME_TASK, later=EXECUTE_TASK)


_ACTIVE = ("queued", "in_progress", "requires_action")


def _due(rows: list[LeftBehind]) -> list[tuple[str, str]]:
    """``(tenant_id, run_id)`` of ``rows``, less the runs waiting for the client before their deadline."""
    now_ms = int(utc_now().timestamp() * 1000)
    due = []
    for tenant_id, run_id, status, state in rows:
        if status == "requires_action":
            action = (state or {}).get("required_action") or {}
            if int(action.get("expires_at_ms", now_ms + 1)) > now_ms:
                continue
        due.append((tenant_id, run_id))
    return due


async def runs_to_recover(database: Database) -> list[tuple[str, str]]:
    """Active runs whose worker died (a live one extends the lease, and releases it when the run pauses or ends;
    a run put aside for admission has no holder, and ``runs.sweep`` finds it). ``(tenant_id, run_id)`` pairs."""
    return _due(await left_behind(database, Run, active=_ACTIVE))


async def sweep_runs(database: Database, *, grace_s: float, died: bool = True) -> list[tuple[str, str]]:
    """Runs to re-enqueue: never picked up within ``grace_s``, put aside whose time passed, waiting for the client
    past their deadline (a worker records the expiry), and (``died``) those whose worker died.
    ``(tenant_id, run_id)`` pairs."""
    rows = await left_behind(
        database, Run, active=_ACTIVE, died=died, set_aside_grace_s=0.0, never_picked_up_grace_s=grace_s
    )
    return _due(rows)


@shared_task(name="runs.recover", ignore_result=True)  # every 2 s: no result rows to store
def recover_task() -> int:
    """Re-enqueue runs whose worker died as ``runs.resume``. Redelivery, or a run still queued from the last
    pass: at worst a run is enqueued twice; the lease lets one worker in."""
    _, env = worker_environment()
    due = run_on_worker_loop(runs_to_recover(env.database))
    for tenant_id, run_id in due:
        enqueue(current_app, RESUME_TASK, tenant_id, run_id)
    if due:
        log.info("resuming %d runs whose worker died", len(due))
    return len(due)


@shared_task(name="runs.sweep")
def sweep_task() -> int:
    """Re-enqueue runs never picked up within a lease (their dispatch was lost, or they waited behind another run
    of their thread), runs put aside for admission whose time passed (their worker's message was lost, or waits
    in the queue), and waits past their deadline; ``runs.recover`` handles leases that passed. Redelivery: at
    worst a run is enqueued twice; the lease lets one worker in."""
    _, env = worker_environment()
    due = run_on_worker_loop(sweep_runs(env.database, grace_s=env.lease_s, died=False))
    for tenant_id, run_id in due:
        enqueue(current_app, EXECUTE_TASK, tenant_id, run_id, True)  # swept: dropped for a run parked there
    if due:
        log.info("re-enqueued %d runs", len(due))
    return len(due)
