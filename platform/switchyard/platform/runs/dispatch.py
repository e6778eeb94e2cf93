"""Sending runs to the workers: the jobs' names, and letting runs that execute in this process finish.

The API sends ``runs.execute(tenant_id, run_id)`` with ``jobs.enqueue`` after the request commits (a rolled-back
request sends nothing); a worker sends it when a run ends and the next run of its thread is queued.
``runs.recover`` sends ``runs.resume`` (the same job, in a queue the workers take first) for runs whose worker
died. Tests execute runs inline instead (``platform.background.inline.InlineDispatcher``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["EXECUTE_TASK", "RESUME_TASK", "drain_inline_runs"]

EXECUTE_TASK = "runs.execute"
RESUME_TASK = "runs.resume"


async def drain_inline_runs(state: Any, timeout_s: float = 30.0) -> None:
    """At shutdown: let runs executing in this process reach their next pause (when the app's job sender runs
    them inline; the broker's sender has nothing to drain)."""
    drain = getattr(getattr(state, "jobs", None), "drain", None)
    if drain is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drain(), timeout_s)
