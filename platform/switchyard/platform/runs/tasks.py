"""Celery jobs of runs: ``runs.resume`` (drive one run whose worker died), ``runs.recover`` (re-enqueue runs whose
worker died, as ``runs.resume``) and ``runs.sweep`` (re-enqueue runs never picked up, and runs put aside for
admission whose time passed, should their worker's message be lost; expire waits past their deadline).
``runs.execute`` itself, which serves tenants in turn, is ``switchyard.platform.background``'s.

Tasks are synchronous; each worker thread keeps one event loop, one database and one accelerator pool, so the
pool's state (queues, replicas) lives across tasks. Delivery is at-least-once: a redelivered
``runs.resume`` finds the run finished, waiting for the client, or leased, and does nothing; otherwise it
resumes from the last checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Coroutine
from datetime import datetime, timedelta
from typing import Any, TypeVar

from celery import current_app, shared_task
from celery.signals import worker_shutting_down
from sqlalchemy import ColumnElement, and_, or_, select
from sqlmodel import col

from switchyard.agents import ModelCallInterrupted
from switchyard.platform.admission import admission_for
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.inference.busy import FleetBusyRecorder
from switchyard.platform.inference.rating import RATE_EVENTS_TASK
from switchyard.platform.inference.runtime import build_pool
from switchyard.platform.jobs import enqueue, enqueue_after
from switchyard.platform.models import Run, utc_now
from switchyard.platform.runs.admitted import AdmissionDeferred
from switchyard.platform.runs.dispatch import EXECUTE_TASK, RESUME_TASK
from switchyard.platform.runs.environment import RunEnvironment
from switchyard.platform.runs.executor import execute_run
from switchyard.platform.settings import Settings, load_settings

__all__ = [
    "TOOL_OPTIONS",
    "drive_run_in_worker",
    "recover_task",
    "resume_run_task",
    "run_in_worker",
    "runs_to_recover",
    "sweep_runs",
    "sweep_task",
    "worker_environment",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


_local = threading.local()

TOOL_OPTIONS: dict[str, Any] = {}
"""Extra ``build_tools`` options for the runs of this worker process (tests set a resolver and the loopback
allowance in the process they start; production leaves it empty)."""


def _settings() -> Settings:
    settings = getattr(current_app.conf, "switchyard_settings", None)
    return settings if isinstance(settings, Settings) else load_settings()


def _send(tenant_id: str, run_id: str) -> None:
    enqueue(current_app, EXECUTE_TASK, tenant_id, run_id)


def _ask_for_rating() -> None:
    try:
        enqueue(current_app, RATE_EVENTS_TASK)
    except Exception:  # the sweeper rates the usage later
        log.warning("could not ask for rating", exc_info=True)


def worker_environment() -> tuple[asyncio.AbstractEventLoop, RunEnvironment]:
    """This thread's loop and run environment (built once: database engine and accelerator pool)."""
    cached = getattr(_local, "env", None)
    if cached is None:
        settings = _settings()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        database = Database(settings.database_url)
        pool = build_pool(settings)
        # the busy time of the replicas this thread runs: real upstreams, and simulated deployments when no fleet
        # process is configured (with one, it records them); flushed after each run
        _local.busy = FleetBusyRecorder(database)
        _local.busy.watch_pool(pool)
        env = RunEnvironment(
            database=database,
            pool=pool,
            admission=admission_for(settings, database),  # its limiters live as long as the thread
            lease_s=settings.agent_run_lease_seconds,
            dispatch=_send,
            tool_options=TOOL_OPTIONS,
            usage_committed=_ask_for_rating,
            worker=True,
        )
        cached = (loop, env)
        _local.env = cached
    return cached


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    loop, _ = worker_environment()
    return loop.run_until_complete(coroutine)


_driving: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Task[str]]] = {}
"""The run each worker thread is driving, so that a stopping worker can interrupt them."""


def drive_run_in_worker(tenant_id: str, run_id: str) -> str:
    """Drive the run on this worker thread (``run_in_worker``); what ``execute_run`` answers, or why it stopped."""
    _, env = worker_environment()
    work = execute_run(env, tenant_id=tenant_id, run_id=run_id)
    return run_in_worker(work, tenant_id, run_id, resume=RESUME_TASK, later=EXECUTE_TASK)


def run_in_worker(work: Awaitable[str], tenant_id: str, owner_id: str, *, resume: str, later: str) -> str:
    """Drive a run or a response (``work``) on this thread's loop; when the worker stops or the database goes
    away mid-call, send ``resume`` for another worker to go on from the last checkpoint; when a model call must
    wait for admission (the job was put aside), send ``later`` for when it may go on, and return ``"deferred"``."""
    loop, _ = worker_environment()
    task = asyncio.ensure_future(work, loop=loop)
    _driving[threading.get_ident()] = (loop, task)
    try:
        return loop.run_until_complete(task)
    except AdmissionDeferred as deferred:  # (the sweepers find it if this send fails: its lease passes)
        delay_s = (deferred.until - utc_now()).total_seconds()
        log.info(
            "%s waits %.1f s for admission (%s); its worker slot is free meanwhile", owner_id, delay_s, deferred.code
        )
        enqueue_after(current_app, later, tenant_id, owner_id, delay_s=delay_s)
        return "deferred"
    except asyncio.CancelledError:  # the worker is stopping: the lease is released, another worker goes on
        enqueue(current_app, resume, tenant_id, owner_id)
        log.info("%s interrupted by the worker's shutdown; sent for another worker to resume", owner_id)
        return "interrupted"
    except ModelCallInterrupted as exc:  # the database went away mid-call: it goes on from its checkpoint
        log.warning("%s interrupted (%s); sent to resume", owner_id, exc)
        enqueue(current_app, resume, tenant_id, owner_id)  # (the sweepers find it if this send fails)
        return "interrupted"
    finally:
        _driving.pop(threading.get_ident(), None)
        try:
            _run(_local.busy.flush())
        except Exception:  # carried to the next run's flush
            log.warning("could not record fleet busy time", exc_info=True)


@worker_shutting_down.connect
def _interrupt_runs(**_: Any) -> None:
    """On SIGTERM Celery stops taking jobs and waits for those running, and an agent run can take minutes: stop
    each run at its next await instead (its last checkpoint stands; the model call in flight is repeated)."""
    for loop, task in list(_driving.values()):
        loop.call_soon_threadsafe(task.cancel)


@shared_task(name="runs.resume")
def resume_run_task(tenant_id: str, run_id: str) -> str:
    """Drive a run whose worker died (this run, not the next in turn: ``runs.execute`` serves tenants in turn),
    sent by ``runs.recover`` to the queue workers take first, so it resumes ahead of every queued run.
    Redelivery: resumes from the last checkpoint, or does nothing when the run is finished, waiting, or leased."""
    return drive_run_in_worker(tenant_id, run_id)


def _lease_passed(now: datetime) -> ColumnElement[bool]:
    return col(Run.lease_expires_at) < now


def _set_aside_passed(now: datetime) -> ColumnElement[bool]:
    """Put aside for admission (no holder) and its time came."""
    return and_(_lease_passed(now), col(Run.lease_owner).is_(None))


def _never_picked_up(now: datetime, grace_s: float) -> ColumnElement[bool]:
    unclaimed_before = now - timedelta(seconds=grace_s)
    return and_(col(Run.lease_expires_at).is_(None), col(Run.updated_at) < unclaimed_before)


async def _due(database: Database, now: datetime, condition: ColumnElement[bool]) -> list[tuple[str, str]]:
    """Active runs matching ``condition``, less those waiting for the client before their deadline."""
    async with database.unit_of_work(UNSCOPED) as session:
        rows = (
            await session.execute(
                select(col(Run.tenant_id), col(Run.id), col(Run.status), col(Run.state))
                .where(col(Run.status).in_(("queued", "in_progress", "requires_action")), condition)
                .order_by(col(Run.id))
                .limit(1000)
            )
        ).all()
    now_ms = int(now.timestamp() * 1000)
    due = []
    for tenant_id, run_id, status, state in rows:
        if status == "requires_action":
            action = (state or {}).get("required_action") or {}
            if int(action.get("expires_at_ms", now_ms + 1)) > now_ms:
                continue
        due.append((tenant_id, run_id))
    return due


async def runs_to_recover(database: Database) -> list[tuple[str, str]]:
    """Active runs whose lease passed: their worker died (a live one extends the lease, and releases it when the
    run pauses or ends; a run put aside for admission has no holder, and ``runs.sweep`` finds it). Returns
    ``(tenant_id, run_id)`` pairs."""
    now = utc_now()
    return await _due(database, now, and_(_lease_passed(now), col(Run.lease_owner).is_not(None)))


async def sweep_runs(database: Database, *, grace_s: float) -> list[tuple[str, str]]:
    """Runs to re-enqueue: active with a lease that passed, never picked up within ``grace_s``, or waiting for
    the client past their deadline (a worker records the expiry). Returns ``(tenant_id, run_id)`` pairs."""
    now = utc_now()
    return await _due(database, now, or_(_lease_passed(now), _never_picked_up(now, grace_s)))


@shared_task(name="runs.recover", ignore_result=True)  # every 2 s: no result rows to store
def recover_task() -> int:
    """Re-enqueue runs whose worker died as ``runs.resume``. Redelivery, or a run still queued from the last
    pass: at worst a run is enqueued twice; the lease lets one worker in."""
    _, env = worker_environment()
    due = _run(runs_to_recover(env.database))
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
    now = utc_now()
    due = _run(_due(env.database, now, or_(_never_picked_up(now, env.lease_s), _set_aside_passed(now))))
    for tenant_id, run_id in due:
        enqueue(current_app, EXECUTE_TASK, tenant_id, run_id, True)  # swept: dropped for a run parked there
    if due:
        log.info("re-enqueued %d runs", len(due))
    return len(due)
