"""The rating nudge: many commits in an interval make one ``billing.rate_events`` job, and a failing broker
costs the caller nothing."""

from __future__ import annotations

import asyncio

from switchyard.platform.inference.rating import RatingNudge


async def test_commits_within_an_interval_are_coalesced_into_one_job() -> None:
    sent: list[int] = []
    nudge = RatingNudge(lambda: sent.append(1), interval_s=0.05)
    for _ in range(100):
        nudge.usage_committed()
    await asyncio.sleep(0.2)
    assert sent == [1]
    nudge.usage_committed()
    await asyncio.sleep(0.2)
    assert (sent, nudge.sent) == ([1, 1], 2)
    await nudge.aclose()


async def test_a_broker_failure_is_logged_and_not_raised() -> None:
    def down() -> None:
        raise ConnectionError("broker down")

    nudge = RatingNudge(down, interval_s=0.01)
    nudge.usage_committed()
    await asyncio.sleep(0.1)
    assert nudge.sent == 0
    nudge.usage_committed()
    await nudge.aclose()  # a nudge not yet due is dropped, not sent late
    await asyncio.sleep(0.05)
    assert nudge.sent == 0
