"""A deployment's admission control in front of its cluster: pure, synchronous, time passed in.

At most ``capacity`` requests are inside the cluster at once (its batch slots); the rest wait in a
``FairQueue`` (priority tiers, then weighted fair share across tenants) and are admitted as slots free up.
One tenant may hold at most ``capacity - headroom`` slots (headroom = 1/8 of the slots, at least one), so a
request from any other tenant finds a free slot at once instead of waiting for a flood's batch to drain.
The live pool drives this on the wall clock; tests and offline studies drive it on a virtual clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from switchyard.accelerator.pool.fair_queue import FairQueue
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.requests import FinishedRequest, Request

__all__ = ["Dispatcher", "Job"]


@dataclass(slots=True)
class Job:
    """A request waiting for or running on the cluster; ``arrival_s`` is when it reached the pool."""

    job_id: int
    tenant: str
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = 1
    weight: float = 1.0
    session: str | None = None
    payload: Any = None
    block_hashes: tuple[int, ...] = ()  # the prompt's KV block ids (prompt_blocks.py), for the prefix cache
    hash_block_tokens: int = 32


class Dispatcher:
    def __init__(self, cluster: Cluster, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.cluster = cluster
        self.capacity = capacity
        self.queue: FairQueue[Job] = FairQueue()
        self.running: dict[int, Job] = {}
        self.tenant_cap = capacity - max(1, capacity // 8) if capacity > 1 else 1
        self._held: dict[str, int] = {}

    @property
    def now(self) -> float:
        """The time up to which the cluster has been simulated."""
        return max([self.cluster.now, *(r.now for r in self.cluster.replicas)])

    @property
    def idle(self) -> bool:
        return not self.running and not len(self.queue)

    def offer(self, job: Job, now_s: float) -> None:
        """A request reaches the pool at ``now_s``: queue it, and admit what fits."""
        cost = job.prompt_tokens + job.output_tokens
        self.queue.push(job, tenant=job.tenant, cost=cost, weight=job.weight, priority=job.priority)
        self._admit(now_s)

    def advance(self, now_s: float) -> list[tuple[Job, FinishedRequest]]:
        """Simulate up to ``now_s`` (``math.inf``: until all work is done) and return what finished."""
        done: list[tuple[Job, FinishedRequest]] = []
        while True:
            self.cluster.step_until(now_s)
            finished = self.cluster.collect()
            for result in finished:
                job = self.running.pop(result.request_id)
                self._held[job.tenant] -= 1
                done.append((job, result))
            admit_at = now_s if math.isfinite(now_s) else self.now
            admitted = self._admit(admit_at)
            if math.isfinite(now_s) or not admitted:
                return done

    def abort(self, job_id: int) -> Job | None:
        """Give up on a job. Still queued: it is removed and returned (it used no compute). Running: the
        cluster stops it and the next ``advance`` returns it as ``cancelled`` with the compute it used."""
        queued = self.queue.remove(lambda job: job.job_id == job_id)
        if queued is None and job_id in self.running:
            self.cluster.abort(job_id)
        return queued

    def _admit(self, now_s: float) -> int:
        admitted = 0
        while len(self.running) < self.capacity:
            job = self.queue.pop(lambda tenant: self._held.get(tenant, 0) < self.tenant_cap)
            if job is None:
                return admitted
            arrival = max(now_s, self.cluster.now)
            self.cluster.submit(
                Request(
                    job.job_id,
                    arrival,
                    job.prompt_tokens,
                    job.output_tokens,
                    job.session,
                    job.tenant,
                    job.block_hashes,
                    job.hash_block_tokens,
                )
            )
            self.running[job.job_id] = job
            self._held[job.tenant] = self._held.get(job.tenant, 0) + 1
            admitted += 1
        return admitted
