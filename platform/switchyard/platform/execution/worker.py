"""The kernel on a worker: each worker thread keeps one event loop, one database and one accelerator pool (the
pool's state, its queues and replicas, lives across jobs), drives runs and responses on them, and interrupts them
when the worker is asked to stop.

Tasks are synchronous Celery jobs; ``run_in_worker`` is how a run's or a response's job drives it: a model call that
must wait for admission frees the worker slot (the job is sent again for when it may go on), and a stopping worker
or a database that went away mid-call sends the job for another worker to resume from its last checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, TypeVar

from celery import current_app
from celery.signals import worker_shutting_down

from switchyard.agents import ModelCallInterrupted
from switchyard.platform.admission import admission_for
from switchyard.platform.db import Database
from switchyard.platform.execution.admitted import AdmissionDeferred
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.inference.busy import FleetBusyRecorder
from switchyard.platform.inference.rating import RATE_EVENTS_TASK
from switchyard.platform.inference.runtime import build_pool
from switchyard.platform.jobs import enqueue, enqueue_after
from switchyard.platform.models import utc_now
from switchyard.platform.settings import Settings, load_settings

__all__ = ["TOOL_OPTIONS", "run_in_worker", "run_on_worker_loop", "worker_environment"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_local = threading.local()

TOOL_OPTIONS: dict[str, Any] = {}
"""Extra ``build_tools`` options for the runs and responses of this worker process (tests set a resolver and the
loopback allowance in the process they start; production leaves it empty)."""


def _settings() -> Settings:
    settings = getattr(current_app.conf, "switchyard_settings", None)
    return settings if isinstance(settings, Settings) else load_settings()


def _send(name: str, args: Sequence[Any]) -> None:
    enqueue(current_app, name, *args)


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
            send_job=_send,
            tool_options=TOOL_OPTIONS,
            usage_committed=_ask_for_rating,
            worker=True,
        )
        cached = (loop, env)
        _local.env = cached
    return cached


def run_on_worker_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end on this thread's loop."""
    loop, _ = worker_environment()
    return loop.run_until_complete(coroutine)


_driving: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Task[str]]] = {}
"""The run each worker thread is driving, so that a stopping worker can interrupt them."""

_stopping = threading.Event()
"""Set once this worker was asked to stop: a job it takes after that is sent on, not driven here."""


def run_in_worker(work: Awaitable[str], tenant_id: str, owner_id: str, *, resume: str, later: str) -> str:
    """Drive a run or a response (``work``) on this thread's loop; when the worker stops or the database goes
    away mid-call, send ``resume`` for another worker to go on from the last checkpoint; when a model call must
    wait for admission (the job was put aside), send ``later`` for when it may go on, and return ``"deferred"``."""
    if _stopping.is_set():  # a message it took while stopping (prefetched, or the resume of a job it interrupted)
        if asyncio.iscoroutine(work):
            work.close()
        enqueue(current_app, resume, tenant_id, owner_id)
        log.info("%s taken while the worker stops; sent for another worker", owner_id)
        return "interrupted"
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
            run_on_worker_loop(_local.busy.flush())
        except Exception:  # carried to the next run's flush
            log.warning("could not record fleet busy time", exc_info=True)


@worker_shutting_down.connect
def _interrupt_runs(**_: Any) -> None:
    """On SIGTERM Celery stops taking jobs and waits for those running, and an agent run can take minutes: stop
    each run at its next await instead (its last checkpoint stands; the model call in flight is repeated), and
    drive nothing more: Celery still runs the messages this worker had taken (a drive of minutes each)."""
    _stopping.set()
    for loop, task in list(_driving.values()):
        loop.call_soon_threadsafe(task.cancel)
