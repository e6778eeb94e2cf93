"""Celery jobs of knowledge: ``vector_stores.ingest`` (ingest one attached file, resuming where it stopped),
``vector_stores.recover`` (every ``RECOVER_EVERY_S``: send again the files no process is ingesting) and
``files.expire`` (every minute: erase the files whose ``expires_at`` passed, their bytes, chunks and attachments).

Each worker thread keeps one event loop, database, pool and admission for its ingestions (built on first use, as
``execution.worker`` builds the runs'; this package sits below it, so it builds its own). Delivery is at-least-once:
a redelivered ``vector_stores.ingest`` finds the file finished, or leased by the process ingesting it, and does
nothing; otherwise it resumes after the chunks stored. A worker asked to stop interrupts its ingestions at their
next await (the batch in flight is not stored nor billed) and sends them for another worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from celery import current_app, shared_task
from celery.signals import worker_shutting_down

from switchyard.accelerator.pool import AcceleratorPool
from switchyard.platform.admission import Admission, admission_for
from switchyard.platform.db import Database
from switchyard.platform.inference.busy import FleetBusyRecorder
from switchyard.platform.inference.rating import RATE_EVENTS_TASK
from switchyard.platform.inference.runtime import build_pool
from switchyard.platform.jobs import enqueue
from switchyard.platform.knowledge.files.service import erase_expired_files
from switchyard.platform.knowledge.vector_stores.ingestion import INGEST_TASK, RECOVER_TASK, ingest_file
from switchyard.platform.knowledge.vector_stores.leases import files_to_recover
from switchyard.platform.settings import Settings, load_settings

__all__ = ["EXPIRE_FILES_TASK", "expire_files_task", "ingest_task", "recover_task"]

EXPIRE_FILES_TASK = "files.expire"

log = logging.getLogger(__name__)
T = TypeVar("T")

_local = threading.local()
_driving: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Task[str]]] = {}
_stopping = threading.Event()


def _settings() -> Settings:
    settings = getattr(current_app.conf, "switchyard_settings", None)
    return settings if isinstance(settings, Settings) else load_settings()


def _ask_for_rating() -> None:
    try:
        enqueue(current_app, RATE_EVENTS_TASK)
    except Exception:  # the billing sweeper rates the usage later
        log.warning("could not ask for rating", exc_info=True)


@dataclass
class WorkerIngestion:
    """A worker thread's ingestion environment (``IngestionEnvironment``)."""

    database: Database
    pool: AcceleratorPool
    admission: Admission
    lease_s: float
    busy: FleetBusyRecorder
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    worker: bool = True
    usage_committed: Any = _ask_for_rating


def _environment() -> tuple[asyncio.AbstractEventLoop, WorkerIngestion]:
    cached = getattr(_local, "env", None)
    if cached is None:
        settings = _settings()
        loop = asyncio.new_event_loop()
        database = Database(settings.database_url)
        pool = build_pool(settings)
        busy = FleetBusyRecorder(database)  # the busy time of replicas this thread simulates (no fleet process)
        busy.watch_pool(pool)
        env = WorkerIngestion(
            database=database,
            pool=pool,
            admission=admission_for(settings, database),
            lease_s=settings.vector_store_ingest_lease_seconds,
            busy=busy,
        )
        cached = (loop, env)
        _local.env = cached
    return cached


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    loop, _ = _environment()
    return loop.run_until_complete(coroutine)


@shared_task(name=INGEST_TASK)
def ingest_task(tenant_id: str, row_id: str) -> str:
    """Ingest attached file ``row_id`` from where it stopped (``ingestion.ingest_file``); what happened.
    Redelivery: nothing when the file is finished or leased, else it resumes."""
    if _stopping.is_set():
        enqueue(current_app, INGEST_TASK, tenant_id, row_id)
        return "interrupted"
    loop, env = _environment()
    task = loop.create_task(ingest_file(env, tenant_id=tenant_id, row_id=row_id))
    _driving[threading.get_ident()] = (loop, task)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:  # the worker is stopping: the lease was released, another worker goes on
        enqueue(current_app, INGEST_TASK, tenant_id, row_id)
        return "interrupted"
    finally:
        _driving.pop(threading.get_ident(), None)
        try:
            loop.run_until_complete(env.busy.flush())
        except Exception:  # carried to the next flush
            log.warning("could not record fleet busy time", exc_info=True)


@shared_task(name=RECOVER_TASK, ignore_result=True)
def recover_task() -> int:
    """Send ``vector_stores.ingest`` for each file in progress that no process ingests (module docstring).
    Redelivery, or a file found twice: the lease lets one process in."""
    _, env = _environment()
    due = _run(files_to_recover(env.database, grace_s=env.lease_s))
    for tenant_id, row_id in due:
        enqueue(current_app, INGEST_TASK, tenant_id, row_id)
    if due:
        log.info("sent %d vector store files no worker was ingesting", len(due))
    return len(due)


@shared_task(name=EXPIRE_FILES_TASK, ignore_result=True)
def expire_files_task() -> int:
    """Erase the files whose time has passed; how many. Redelivery finds them erased."""
    _, env = _environment()
    erased = _run(erase_expired_files(env.database))
    if erased:
        log.info("erased %d expired files", erased)
    return erased


@worker_shutting_down.connect
def _interrupt_ingestions(**_: Any) -> None:
    _stopping.set()
    for loop, task in list(_driving.values()):
        loop.call_soon_threadsafe(task.cancel)
