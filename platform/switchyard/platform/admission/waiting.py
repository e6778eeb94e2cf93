"""Admission for background work (agent runs): wait out what time cures instead of refusing.

The call goes through :meth:`Admission.admit` like any request; a refusal has undone everything, so waiting
holds nothing. A rate's refusal waits until that rate would allow the call; a full set of request slots is
asked again after ``SLOT_POLL_S``, doubling up to ``SLOT_POLL_MAX_S``; when the limiters' Redis is unreachable
the call waits too (a run is not failed for an outage it did not cause), asking again after ``OUTAGE_POLL_S``,
doubling up to ``OUTAGE_POLL_MAX_S``. Every other refusal (a call that can never fit, a budget) is raised.
The caller bounds the wait (a run's time limit cancels it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from switchyard.platform.admission.calls import ModelCall
from switchyard.platform.admission.refusals import LimitsOutage, TryLater
from switchyard.platform.admission.service import Admission, Holds

__all__ = ["OUTAGE_POLL_MAX_S", "OUTAGE_POLL_S", "SLOT_POLL_MAX_S", "SLOT_POLL_S", "admit_waiting"]

SLOT_POLL_S = 0.05
SLOT_POLL_MAX_S = 1.0
OUTAGE_POLL_S = 0.5
OUTAGE_POLL_MAX_S = 5.0


async def admit_waiting(
    admission: Admission, call: ModelCall, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> Holds:
    """Admit ``call``, waiting for as long as it takes; raises the refusals that waiting cannot cure."""
    slot_pause, outage_pause = SLOT_POLL_S, OUTAGE_POLL_S
    while True:
        try:
            return await admission.admit(call)
        except TryLater as refused:
            if refused.retry_after_s is not None:
                await sleep(refused.retry_after_s)
                continue
            await sleep(slot_pause)
            slot_pause = min(2 * slot_pause, SLOT_POLL_MAX_S)
        except LimitsOutage:
            await sleep(outage_pause)
            outage_pause = min(2 * outage_pause, OUTAGE_POLL_MAX_S)
