"""Sending jobs to the workers: ``enqueue()``, the one way every part of the platform sends them.

A job is a Celery task named ``domain.verb`` with JSON-scalar arguments; which queue it waits in is the Celery app's
routing (``worker/celery_app.py``), not the sender's choice. ``enqueue(jobs, task, *args, session=session)``
sends it once ``session`` commits and drops it if the session rolls back, so a failed request sends nothing and
a worker never looks for rows that are not stored yet. Without a session it sends at once: jobs sending jobs
between their own transactions, and the rating nudge's coalesced sends.

The broker can fail after the commit: a job sent after commit is logged and dropped then, so its domain needs a
sweeper that finds the committed work again (``runs.sweep``, ``billing.sweep``). In an API process the jobs of a
commit are handed to the ``BrokerSender``'s own thread, which publishes them in order: a publish is a blocking
round trip to the broker, and the event loop that would wait for it serves every tenant's requests.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, SessionTransaction

from switchyard.platform.settings import Settings

__all__ = ["OUTBOX_JOBS", "BrokerSender", "JobSender", "close_jobs", "enqueue", "enqueue_after", "jobs_for"]

log = logging.getLogger(__name__)

OUTBOX_JOBS = 10_000
"""Jobs an API process holds for its sender thread at most: past it (a broker down or slow for long) a job is
dropped with a warning, as one whose send failed, for its domain's sweeper to find."""

_PENDING = "switchyard_jobs_after_commit"
"""Key in ``Session.info``: the jobs waiting for the session's commit."""


class JobSender(Protocol):
    """Where jobs go: a Celery app (inside a worker), a ``BrokerSender`` (API processes), or an in-process
    stand-in (tests: ``platform.background.inline.InlineDispatcher``)."""

    def send_task(self, name: str, args: Sequence[Any]) -> object: ...


class BrokerSender:
    """Sends jobs to the broker of ``settings`` through a Celery app made on first use (a process that never sends
    a job never touches the broker): ``send_task`` now, the caller waiting for the broker and seeing its errors;
    ``send_soon`` from a thread of the sender's own, in the order given, errors logged (jobs sent after a commit,
    whose domains' sweepers find work whose job was lost), at most ``outbox_jobs`` waiting (past it a job is
    dropped and logged likewise). ``close`` sends what waits, then stops the thread."""

    def __init__(self, settings: Settings, *, outbox_jobs: int = OUTBOX_JOBS) -> None:
        self._settings = settings
        self._app: Any = None
        self._outbox: queue.Queue[tuple[contextvars.Context, str, list[Any]] | None] = queue.Queue(outbox_jobs)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def send_task(self, name: str, args: Sequence[Any]) -> object:
        with self._lock:  # the app is made once, whichever thread sends first
            if self._app is None:
                # imported on first use: the Celery app names every task package, which import the domains
                from switchyard.platform.worker.celery_app import create_celery

                self._app = create_celery(self._settings)
        # ignore_result: an API process never reads a job's result, and subscribing to it retries a lost Redis
        # result backend for 20 s, holding a send (and the shutdown waiting for it) through a Redis outage
        return self._app.send_task(name, args=list(args), ignore_result=True)

    def send_soon(self, name: str, args: Sequence[Any]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._send_waiting, name="switchyard-job-sender", daemon=True)
            self._thread.start()
        try:
            self._outbox.put_nowait((contextvars.copy_context(), name, list(args)))  # with the request's trace
        except queue.Full:
            log.warning(
                "could not send job %s%r: %d jobs wait for the broker; its sweeper will",
                name,
                tuple(args),
                self._outbox.maxsize,
            )

    def close(self, timeout_s: float = 10.0) -> None:
        """Send the jobs waiting (for at most ``timeout_s``; the sweepers find what is left), then stop."""
        if self._thread is not None:
            deadline = time.monotonic() + timeout_s
            try:
                self._outbox.put(None, timeout=timeout_s)
            except queue.Full:  # the broker is still away: what waits is left to the sweepers
                return
            self._thread.join(max(0.0, deadline - time.monotonic()))
            self._thread = None

    def _send_waiting(self) -> None:
        while (job := self._outbox.get()) is not None:
            context, name, args = job
            try:
                context.run(self.send_task, name, args)
            except Exception:  # committed already: the domain's sweeper finds the work again
                log.exception("could not send job %s%r after the commit; its sweeper will", name, tuple(args))


def jobs_for(state: Any) -> JobSender:
    """The app's job sender (``state.jobs``; tests replace it), a ``BrokerSender`` made on first use from
    ``state.settings``."""
    jobs: JobSender | None = getattr(state, "jobs", None)
    if jobs is None:
        jobs = BrokerSender(state.settings)
        state.jobs = jobs
    return jobs


def close_jobs(state: Any) -> None:
    """Send the jobs the app's ``BrokerSender`` still holds and stop its thread (at shutdown; blocks)."""
    jobs = getattr(state, "jobs", None)
    if isinstance(jobs, BrokerSender):
        jobs.close()


def enqueue(jobs: JobSender, task: str, *args: Any, session: AsyncSession | None = None) -> None:
    """Send job ``task(*args)`` through ``jobs``: once ``session`` commits (nothing if it rolls back), or now when
    there is no session (then a broker error is raised to the caller)."""
    if session is None:
        jobs.send_task(task, list(args))
        return
    _pending(session.sync_session).append((jobs, task, list(args)))


def enqueue_after(app: Any, task: str, *args: Any, delay_s: float) -> None:
    """Send job ``task(*args)`` now, for a worker to run ``delay_s`` seconds from now (a Celery ``countdown``:
    the worker holding it until then keeps its slots free). Workers only: ``app`` is their Celery app."""
    app.send_task(task, args=list(args), countdown=max(0.0, delay_s))


def _pending(session: Session) -> list[tuple[JobSender, str, list[Any]]]:
    pending: list[tuple[JobSender, str, list[Any]]] | None = session.info.get(_PENDING)
    if pending is None:
        pending = []
        session.info[_PENDING] = pending
        event.listen(session, "after_commit", _send_pending)
        event.listen(session, "after_soft_rollback", _drop_pending)
    return pending


def _send_pending(session: Session) -> None:
    pending: list[tuple[JobSender, str, list[Any]]] = session.info[_PENDING]
    committed = list(pending)
    pending.clear()  # the session may run more transactions, each sending only its own jobs
    for sender, task, args in committed:
        if isinstance(sender, BrokerSender):  # an API process: its event loop does not wait for the broker
            sender.send_soon(task, args)
            continue
        try:
            sender.send_task(task, args)
        except Exception:  # committed already: the domain's sweeper finds the work again
            log.exception("could not send job %s%r after the commit; its sweeper will", task, tuple(args))


def _drop_pending(session: Session, previous_transaction: SessionTransaction) -> None:
    if previous_transaction.parent is None:  # the whole transaction, not a savepoint inside it
        session.info[_PENDING].clear()
