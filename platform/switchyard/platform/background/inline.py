"""Executing runs (and background responses) in this process instead of on the workers (tests, and single-process use).

Replace the app's job sender with an ``InlineDispatcher`` (``app.state.jobs``) and every ``runs.execute`` the API
sends after a commit runs as a task of the app's event loop. API modules never import this one: it is the only
way into the worker's executor from an API process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.knowledge.vector_stores import INGEST_TASK, ingest_file
from switchyard.platform.responses.executor import EXECUTE_TASK as RESPONSE_TASK
from switchyard.platform.responses.executor import execute_response
from switchyard.platform.runs.dispatch import EXECUTE_TASK, RESUME_TASK
from switchyard.platform.runs.executor import execute_run

__all__ = ["InlineDispatcher"]

log = logging.getLogger(__name__)


class InlineDispatcher:
    """A job sender that executes ``runs.execute`` (and ``runs.resume``) as tasks of the running event loop."""

    def __init__(self, env: RunEnvironment) -> None:
        self.env = env
        if env.send_job is None:
            env.send_job = self.send_task
        self.tasks: set[asyncio.Task[str]] = set()

    def send_task(self, name: str, args: Sequence[Any]) -> None:
        if name == RESPONSE_TASK:
            tenant_id, response_id = args
            self._start(execute_response(self.env, tenant_id=tenant_id, response_id=response_id))
            return
        if name == INGEST_TASK:
            tenant_id, row_id = args
            self._start(ingest_file(self.env, tenant_id=tenant_id, row_id=row_id))
            return
        if name not in (EXECUTE_TASK, RESUME_TASK):
            raise ValueError(f"runs and responses execute inline; job {name!r} has no worker in this process")
        tenant_id, run_id = args
        self._start(execute_run(self.env, tenant_id=tenant_id, run_id=run_id))

    def _start(self, work: Awaitable[str]) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[str]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("inline run failed", exc_info=task.exception())

    async def drain(self) -> None:
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
