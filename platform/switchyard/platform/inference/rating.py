"""Asking the workers to rate usage soon after it is committed.

Usage events are committed ``pending``; ``billing.rate_events`` prices them (and opens the month's draft
invoice). A process that commits usage calls ``RatingNudge.usage_committed()``, which costs nothing on the hot
path: at most once per ``interval_s`` one ``billing.rate_events`` job is sent (it rates the oldest pending
events), from a thread so the event loop never waits for the broker. API processes build it with
``partial(jobs.enqueue, jobs, RATE_EVENTS_TASK)``: no session, since the usage is committed already. A nudge that
cannot be sent is logged and dropped; ``billing.sweep`` rates whatever is still pending after 30 s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

__all__ = ["RATE_EVENTS_TASK", "RatingNudge"]

log = logging.getLogger(__name__)
RATE_EVENTS_TASK = "billing.rate_events"


class RatingNudge:
    """Coalesces "usage was committed" into one ``billing.rate_events`` job per interval, sent by ``send()``."""

    def __init__(self, send: Callable[[], None], *, interval_s: float = 0.5) -> None:
        self._send = send
        self._interval_s = interval_s
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self.sent = 0

    def usage_committed(self) -> None:
        """Call on the event loop after a transaction with usage events committed."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        task = asyncio.get_running_loop().create_task(asyncio.to_thread(self._send_once))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def _send_once(self) -> None:
        try:
            self._send()
            self.sent += 1
        except Exception:
            log.warning("could not ask for rating; the sweeper will rate the usage", exc_info=True)

    async def aclose(self) -> None:
        """Stop: a nudge not yet due is dropped (the sweeper rates its usage); sends in progress finish."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._sending:
            await asyncio.gather(*self._sending)
