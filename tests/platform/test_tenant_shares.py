"""A tenant's share of a worker's slots (``background.shares``), as one worker process counts it."""

from __future__ import annotations

import pytest

from switchyard.platform.background.shares import PARKED_RETRY_S, PRUNE_AT, STALE_AFTER_S, TenantShares


@pytest.mark.parametrize(("share", "slots", "limit"), [(0.5, 4, 2), (0.5, 8, 4), (0.5, 1, 1), (0.3, 4, 1), (1.0, 4, 4)])
def test_a_tenant_may_hold_its_share_of_the_slots_rounded_down_and_at_least_one(
    share: float, slots: int, limit: int
) -> None:
    shares = TenantShares(share, slots)
    assert [shares.take("ten_a") for _ in range(limit + 1)] == [True] * limit + [False]
    assert shares.full() == {"ten_a"}
    assert shares.take("ten_b"), "another tenant's job still takes a slot"


def test_a_slot_given_back_can_be_taken_again_and_the_tenant_is_no_longer_full() -> None:
    shares = TenantShares(0.5, 4)
    assert [shares.take("ten_a"), shares.take("ten_a")] == [True, True]
    shares.give_back("ten_a")
    assert shares.full() == frozenset()
    assert shares.take("ten_a")
    assert not shares.take("ten_a")


def test_a_job_is_parked_here_until_its_parked_message_is_due_and_a_while_after() -> None:
    now = [1000.0]
    shares = TenantShares(0.5, 4, clock=lambda: now[0])
    job = ("ten_a", "resp_1")
    assert not shares.parked_here(job), "nothing parked yet"
    shares.park(job)
    assert shares.parked_here(job), "a sweeper's message for it is dropped"
    now[0] += PARKED_RETRY_S + STALE_AFTER_S - 0.1
    assert shares.parked_here(job), "a busy worker runs the parked message late"
    now[0] += 0.2
    assert not shares.parked_here(job), "the parked message went to another worker: a sweeper's is parked afresh"
    shares.park(job)
    shares.unpark(job)
    assert not shares.parked_here(job), "its message came and took it"


def test_stale_parked_entries_are_dropped_once_there_are_many() -> None:
    now = [0.0]
    shares = TenantShares(0.5, 4, clock=lambda: now[0])
    for index in range(PRUNE_AT):
        shares.park(("ten_a", f"run_{index}"))
    now[0] += PARKED_RETRY_S + STALE_AFTER_S + 1
    shares.park(("ten_a", "run_new"))
    assert shares.parked_here(("ten_a", "run_new"))
    assert len(shares._parked) == 1
