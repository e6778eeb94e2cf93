"""The fleet file's routing policy reaches the live pool, and agent runs report the prefix cache as they are billed.

``benchmarks/kv_live.py`` on a tiny plan: Switchyard's fleet process, API and worker on SQLite with one simulated
deployment of 4 replicas, once per policy; multi-turn agent runs on threads through the API (agents with long
instructions and the calculator, so some turns make two model calls). The benchmark prints TTFT and cached shares;
this asserts what they rest on:

- ``round_robin`` spreads the model calls over the 4 replicas evenly, whatever the prompts share;
- ``kv_aware`` serves every later call of a thread from the replica holding its history: it reads at least the
  previous call's prompt (its whole 32-token blocks) from cache;
- under both, each model step's tokens, cached tokens and chip-µs (``GET .../runs/{id}/steps``) sum to what
  ``/v1/usage`` reports for the tenant, and every run completes.
"""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.kv_live import (
    DEPLOYMENT,
    Measured,
    Plan,
    by_thread,
    discrepancies,
    follow_up_misses,
    measure,
    platform,
    replica_calls,
)

pytestmark = pytest.mark.slow

PLAN = Plan(conversations=4, turns=3, concurrency=2, agents=2, instruction_words=300, think_s=0.0)
TIME_SCALE = 0.0  # answers at once; the simulated timings and caches are the same


def _hold(policy: str) -> Measured:
    with platform(policy, time_scale=TIME_SCALE, worker_slots=PLAN.concurrency) as (url, key):
        return asyncio.run(measure(url, key, PLAN))


@pytest.mark.timeout(600)
def test_round_robin_spreads_calls_and_kv_aware_keeps_each_thread_on_its_cached_history() -> None:
    round_robin = _hold("round_robin")
    kv_aware = _hold("kv_aware")

    assert discrepancies(round_robin) == []
    assert discrepancies(kv_aware) == []
    assert len(by_thread(kv_aware)) == PLAN.conversations
    calls = replica_calls(round_robin)
    assert len(calls) == DEPLOYMENT["replicas"]
    assert max(calls.values()) - min(calls.values()) <= 1, calls
    later = len(kv_aware.steps) - PLAN.conversations
    assert later >= PLAN.conversations * (PLAN.turns - 1)
    assert follow_up_misses(kv_aware) == []
