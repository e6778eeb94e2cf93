"""Weighted fair queuing at the pool: a flooding tenant cannot push another tenant's TTFT past its SLO.

Driven on a virtual clock with the same Dispatcher the live pool uses. The FIFO run is the control that shows
the scenario really saturates the fleet (without fair queuing the quiet tenant's SLO is broken).
"""

from __future__ import annotations

import math

import numpy as np

from switchyard.accelerator.pool.dispatcher import Dispatcher, Job
from switchyard.accelerator.pool.fair_queue import FairQueue
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.requests import FinishedRequest

SLO_TTFT_MS = 2000.0


def _quiet_and_flood_ttft(fair: bool) -> dict[str, list[float]]:
    """TTFT per tenant on one small replica: "flood" sends 150 req/s for 30 s (about five times what the replica
    serves, with output lengths spread like real traffic), "quiet" 1 req/s once the flood is in steady state."""
    deployment = make_deployment("meta-llama/Llama-3.1-8B", "trn2.3xlarge", 4)
    cluster = Cluster(deployment, replicas=1, config=EngineConfig(max_batch=16))
    dispatcher = Dispatcher(cluster, capacity=16)
    rng = np.random.default_rng(7)
    arrivals = [(float(t), "flood") for t in np.sort(rng.uniform(0, 30, 4500))]
    arrivals += [(float(t), "quiet") for t in np.arange(10, 30, 1.0)]
    arrivals.sort()
    ttft: dict[str, list[float]] = {"flood": [], "quiet": []}

    def record(finished: list[tuple[Job, FinishedRequest]]) -> None:
        for job, result in finished:
            ttft[job.payload].append((result.first_token_s - job.arrival_s) * 1e3)

    for job_id, (t, tenant) in enumerate(arrivals):
        record(dispatcher.advance(t))
        # Without fair queuing every request is one anonymous stream: plain FIFO.
        output = int(rng.integers(20, 400)) if tenant == "flood" else 100
        dispatcher.offer(Job(job_id, tenant if fair else "everyone", t, 800, output, payload=tenant), t)
    record(dispatcher.advance(math.inf))
    return ttft


def _p99(values: list[float]) -> float:
    return float(np.percentile(values, 99))


def test_fair_queue_orders_by_priority_then_fair_share() -> None:
    queue: FairQueue[str] = FairQueue()
    for n in range(5):
        queue.push(f"a{n}", tenant="a", cost=100)
    queue.push("b0", tenant="b", cost=100)
    queue.push("urgent", tenant="a", cost=100, priority=2)
    order = [queue.pop() for _ in range(len(queue))]
    assert order[0] == "urgent"
    assert order.index("b0") <= 2  # b is not stuck behind a's backlog


def test_flooding_tenant_cannot_break_another_tenants_ttft_slo() -> None:
    fair = _quiet_and_flood_ttft(fair=True)
    assert len(fair["quiet"]) == 20
    assert len(fair["flood"]) == 4500
    assert _p99(fair["quiet"]) < SLO_TTFT_MS
    assert _p99(fair["flood"]) > SLO_TTFT_MS  # the flood only delays itself


def test_without_fair_queuing_the_same_flood_breaks_the_slo() -> None:
    fifo = _quiet_and_flood_ttft(fair=False)
    assert len(fifo["quiet"]) == 20
    assert _p99(fifo["quiet"]) > SLO_TTFT_MS
