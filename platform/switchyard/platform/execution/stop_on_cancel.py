"""A run's (or a background response's) model, stopped at the fleet when the run is cancelled mid-call.

The run loop reads a run's ``cancel_requested`` between transitions, so a cancel used to wait for the model call in
flight to end, and that call generated (and billed) all its tokens. :class:`StopsOnCancel` reads the flag during the
call too and has the fleet stop it (``Backend.cancel`` with the call's request id, the step id): the call ends at
once with the fleet's receipt of what it generated (``finish_reason: "cancelled"``), which ``drive_run`` bills before
it ends the run ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from switchyard.agents import Model, ModelRequest, ModelResponse

__all__ = ["CANCEL_POLL_S", "StopsOnCancel"]

log = logging.getLogger(__name__)

CANCEL_POLL_S = 0.5
"""How often a run's ``cancel_requested`` is read during a model call (one primary-key read)."""


class StopsOnCancel:
    """A run's model: while a call runs, reads the run's cancel flag every :data:`CANCEL_POLL_S` and, once it is set,
    has the fleet stop the call (``stop``, with the call's request id). The call then ends early with the fleet's
    receipt of what it generated (``finish_reason: "cancelled"``)."""

    def __init__(
        self,
        inner: Model,
        *,
        cancel_requested: Callable[[], Awaitable[bool]],
        stop: Callable[[str], None],
        poll_s: float = CANCEL_POLL_S,
    ) -> None:
        self.inner = inner
        self.cancel_requested = cancel_requested
        self.stop = stop
        self.poll_s = poll_s

    async def request(self, request: ModelRequest) -> ModelResponse:
        watcher = asyncio.get_running_loop().create_task(self._watch(request.request_id))
        try:
            return await self.inner.request(request)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch(self, request_id: str) -> None:
        flagged = False
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                flagged = flagged or await self.cancel_requested()
                if flagged:  # again at every poll: a call the fleet had not registered yet is stopped once it has
                    self.stop(request_id)
            except Exception:  # never the call's failure: the next poll tries again, the loop reads the flag too
                log.warning("could not stop %s for its cancel", request_id, exc_info=True)
