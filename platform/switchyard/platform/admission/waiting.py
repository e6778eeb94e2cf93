"""Admission for background work (agent runs, responses): wait out what time cures instead of refusing.

The call goes through :meth:`Admission.admit` like any request; a refusal has undone everything, so waiting
holds nothing. A rate's refusal waits until that rate would allow the call; a full set of request slots is
asked again after ``SLOT_POLL_S``, doubling up to ``SLOT_POLL_MAX_S``; when the limiters' Redis is unreachable
the call waits too (a run is not failed for an outage it did not cause), asking again after ``OUTAGE_POLL_S``,
doubling up to ``OUTAGE_POLL_MAX_S``. Every other refusal (a call that can never fit, a budget) is raised.
The caller bounds the wait (a run's time limit cancels it).

``admit_waiting`` waits in place: right where nothing else waits for the caller (a foreground response in its
API process). A worker must not hold its slot while it waits: it asks :func:`retry_in_s` how long to put the
job aside instead, and gives the job back for that long.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from switchyard.platform.admission.calls import ModelCall
from switchyard.platform.admission.refusals import LimitsOutage, TryLater
from switchyard.platform.admission.service import Admission, Holds

__all__ = [
    "OUTAGE_POLL_MAX_S",
    "OUTAGE_POLL_S",
    "SLOT_POLL_MAX_S",
    "SLOT_POLL_S",
    "SLOT_RETRY_MAX_S",
    "SLOT_RETRY_S",
    "admit_waiting",
    "retry_in_s",
]

SLOT_POLL_S = 0.05
SLOT_POLL_MAX_S = 1.0
OUTAGE_POLL_S = 0.5
OUTAGE_POLL_MAX_S = 5.0
SLOT_RETRY_S = 1.0
SLOT_RETRY_MAX_S = 15.0


def retry_in_s(refused: TryLater | LimitsOutage, *, waited_s: float) -> float:
    """How long a job set aside by ``refused`` waits before its call is asked again, having waited ``waited_s``
    since it last made progress: a rate's own answer; for a request slot or an outage a quarter of the wait so far
    (at least ``SLOT_RETRY_S`` / ``OUTAGE_POLL_S``, at most ``SLOT_RETRY_MAX_S`` / ``OUTAGE_POLL_MAX_S``), so that a
    backlog of jobs waiting for their tenant's slots asks less often the longer it waits."""
    if isinstance(refused, TryLater) and refused.retry_after_s is not None:
        return max(0.05, refused.retry_after_s)
    if isinstance(refused, TryLater):
        return min(SLOT_RETRY_MAX_S, max(SLOT_RETRY_S, waited_s / 4))
    return min(OUTAGE_POLL_MAX_S, max(OUTAGE_POLL_S, waited_s / 4))


async def admit_waiting(
    admission: Admission,
    call: ModelCall,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rates_charged: bool = False,
) -> Holds:
    """Admit ``call``, waiting for as long as it takes; raises the refusals that waiting cannot cure.
    ``rates_charged`` as for :meth:`Admission.admit`."""
    slot_pause, outage_pause = SLOT_POLL_S, OUTAGE_POLL_S
    while True:
        try:
            return await admission.admit(call, rates_charged=rates_charged)
        except TryLater as refused:
            if refused.retry_after_s is not None:
                await sleep(refused.retry_after_s)
                continue
            await sleep(slot_pause)
            slot_pause = min(2 * slot_pause, SLOT_POLL_MAX_S)
        except LimitsOutage:
            await sleep(outage_pause)
            outage_pause = min(2 * outage_pause, OUTAGE_POLL_MAX_S)
