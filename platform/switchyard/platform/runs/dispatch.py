"""Sending runs to workers: Celery (``runs.execute``) by default, or inline in this process (tests).

Runs are dispatched after the request's transaction commits (``dispatch_after_commit``): a rolled-back
request sends nothing, and a worker never looks for a run that is not stored yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.runs.executor import RunEnvironment, execute_run
from switchyard.platform.worker.sender import TaskSender, task_sender_for

__all__ = [
    "CeleryDispatcher",
    "InlineDispatcher",
    "RunDispatcher",
    "dispatch_after_commit",
    "dispatcher_for",
    "drain_inline_runs",
]

log = logging.getLogger(__name__)
EXECUTE_TASK = "runs.execute"


class RunDispatcher(Protocol):
    def dispatch(self, tenant_id: str, run_id: str) -> None: ...


class CeleryDispatcher:
    """Sends ``runs.execute(tenant_id, run_id)`` to the workers."""

    def __init__(self, sender: TaskSender) -> None:
        self._sender = sender

    def dispatch(self, tenant_id: str, run_id: str) -> None:
        self._sender.send(EXECUTE_TASK, [tenant_id, run_id])


class InlineDispatcher:
    """Executes runs as tasks of the running event loop (tests, and single-process use)."""

    def __init__(self, env: RunEnvironment) -> None:
        self.env = env
        if env.dispatch is None:
            env.dispatch = self.dispatch
        self.tasks: set[asyncio.Task[str]] = set()

    def dispatch(self, tenant_id: str, run_id: str) -> None:
        task = asyncio.get_running_loop().create_task(execute_run(self.env, tenant_id=tenant_id, run_id=run_id))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[str]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("inline run failed", exc_info=task.exception())

    async def drain(self) -> None:
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


async def drain_inline_runs(state: Any, timeout_s: float = 30.0) -> None:
    """At shutdown: let runs executing in this process reach their next pause (inline dispatcher only)."""
    dispatcher = getattr(state, "run_dispatcher", None)
    if isinstance(dispatcher, InlineDispatcher):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(dispatcher.drain(), timeout_s)


def dispatcher_for(state: Any) -> RunDispatcher:
    """The app's dispatcher (``state.run_dispatcher``), created on first use from the settings."""
    dispatcher: RunDispatcher | None = getattr(state, "run_dispatcher", None)
    if dispatcher is None:
        dispatcher = CeleryDispatcher(task_sender_for(state))
        state.run_dispatcher = dispatcher
    return dispatcher


def dispatch_after_commit(session: AsyncSession, dispatcher: RunDispatcher, tenant_id: str, run_id: str) -> None:
    """Dispatch the run once ``session`` commits; nothing is sent if it rolls back."""
    target = session.sync_session
    pending: list[tuple[RunDispatcher, str, str]] | None = target.info.get("runs_to_dispatch")
    if pending is None:
        pending = []
        target.info["runs_to_dispatch"] = pending

        def after_commit(_session: Any) -> None:
            jobs = list(pending)
            pending.clear()
            for job_dispatcher, tenant, run in jobs:
                try:
                    job_dispatcher.dispatch(tenant, run)
                except Exception:  # the sweeper picks the run up after its grace period
                    log.exception("could not dispatch run %s; the sweeper will", run)

        def after_rollback(*_args: Any) -> None:
            pending.clear()

        event.listen(target, "after_commit", after_commit)
        event.listen(target, "after_soft_rollback", after_rollback)
    pending.append((dispatcher, tenant_id, run_id))
