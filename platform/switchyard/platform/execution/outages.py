"""A model backend that is briefly unreachable is waited out, not blamed on the job.

The fleet process restarting, an upstream answering 5xx or refusing connections: before, the run failed with
``model_error`` at the first such call. :class:`WaitsOutOutages` wraps a job's (admitted) model: when the backend
cannot be reached (``UpstreamError.retryable``), a worker puts the job aside and sends it again after a backoff
(``AdmissionDeferred`` with code ``model_unreachable``: the worker slot is free meanwhile), and a process that
must keep the job (a foreground response) sleeps the backoff and calls again. Either way the job waits no longer
than its own time limit (``limits.timeout_s``): the kernel caps a deferral there, and the driver bounds a call by it,
so a backend that stays away ends the job ``incomplete`` at its deadline. Nothing is billed for a call that did
not answer: a step is billed when its call completes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from switchyard.accelerator.pool import UpstreamError
from switchyard.agents import Model, ModelRequest, ModelResponse
from switchyard.platform.execution.admitted import AdmissionDeferred
from switchyard.platform.models import utc_now

__all__ = ["FIRST_WAIT_S", "LONGEST_WAIT_S", "WaitsOutOutages", "outage_wait_s"]

log = logging.getLogger(__name__)

FIRST_WAIT_S = 0.5
LONGEST_WAIT_S = 15.0


def outage_wait_s(waited_s: float) -> float:
    """How long to wait before calling again, having waited ``waited_s`` already: half as long again, from
    ``FIRST_WAIT_S`` up to ``LONGEST_WAIT_S`` (a restart is over in seconds; a longer outage is asked less often)."""
    return min(LONGEST_WAIT_S, max(FIRST_WAIT_S, waited_s / 2))


class WaitsOutOutages:
    """A job's model that waits out an unreachable backend (``defer``: by putting the job aside, in a worker).

    ``waiting_since`` is when the job last made progress: a job put aside and resumed keeps waiting from then."""

    def __init__(
        self,
        inner: Model,
        *,
        defer: bool,
        waiting_since: datetime | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.inner = inner
        self.defer = defer
        self.waiting_since = waiting_since
        self.sleep = sleep

    async def request(self, request: ModelRequest) -> ModelResponse:
        while True:
            try:
                response = await self.inner.request(request)
            except UpstreamError as exc:
                if not exc.retryable:
                    raise
                now = utc_now()
                since = self.waiting_since or now
                self.waiting_since = since
                wait_s = outage_wait_s((now - since).total_seconds())
                log.warning(
                    "%s: the model backend is unreachable (%s); calling again in %.1f s",
                    request.request_id,
                    exc,
                    wait_s,
                )
                if self.defer:
                    raise AdmissionDeferred("model_unreachable", now + timedelta(seconds=wait_s)) from exc
                await self.sleep(wait_s)
                continue
            self.waiting_since = None
            return response
