"""A cluster of identical replicas behind a router: the engine API a live pool or a trace run drives."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.costmodel import Coefficients
from switchyard.accelerator.sim.deployment import Deployment
from switchyard.accelerator.sim.engine import EngineConfig, ReplicaEngine
from switchyard.accelerator.sim.host_tier import pooled
from switchyard.accelerator.sim.requests import FinishedRequest, Request
from switchyard.accelerator.sim.router import RoutingPolicy, make_router
from switchyard.accelerator.sim.stepcost import StepCost

__all__ = ["Cluster"]


class Cluster:
    """`replicas` copies of one deployment. Pure and synchronous: time only moves in step_until()."""

    def __init__(
        self,
        deployment: Deployment,
        replicas: int,
        policy: RoutingPolicy | str = RoutingPolicy.LEAST_LOAD,
        *,
        config: EngineConfig | None = None,
        coefficients: Coefficients | None = None,
        seed: int = 0,
    ) -> None:
        if replicas < 1:
            raise ValueError("a cluster needs at least one replica")
        self.deployment = deployment
        self.coefficients_group, coeffs = (
            coefficients_for(deployment.instance) if coefficients is None else ("custom", coefficients)
        )
        cost = StepCost(deployment, coeffs)
        cfg = config or EngineConfig()
        self.replicas = _replicas(cost, deployment, cfg, 0, replicas)
        self.policy = RoutingPolicy(policy)
        self._router = make_router(self.policy, seed)
        self.now = 0.0

    @classmethod
    def heterogeneous(
        cls,
        pools: Sequence[tuple[Deployment, int]],
        policy: RoutingPolicy | str = RoutingPolicy.LEAST_LOAD,
        *,
        config: EngineConfig | None = None,
        seed: int = 0,
    ) -> Cluster:
        """One router over replicas of different deployments (same model on different hardware or TP)."""
        if not pools:
            raise ValueError("a cluster needs at least one pool")
        names = {dep.model.name for dep, _ in pools}
        if len(names) > 1:
            raise ValueError(f"every pool must serve the same model, got {sorted(names)}")
        first, n = pools[0]
        cluster = cls(first, n, policy, config=config, seed=seed)
        cfg = config or EngineConfig()
        groups = [cluster.coefficients_group]
        for dep, count in pools[1:]:
            group, coeffs = coefficients_for(dep.instance)
            groups.append(group)
            cost = StepCost(dep, coeffs)
            start = len(cluster.replicas)
            cluster.replicas += _replicas(cost, dep, cfg, start, count)
        cluster.coefficients_group = " + ".join(dict.fromkeys(groups))
        return cluster

    def submit(self, request: Request, *, at_s: float | None = None, first_token_s: float | None = None) -> int:
        """Advance every replica to the arrival time (or `at_s`), route the request, return the replica index.

        `first_token_s` marks a request whose prompt KV was computed elsewhere (see ReplicaEngine.submit).
        """
        t = request.arrival_s if at_s is None else at_s
        if t < self.now:
            raise ValueError(f"request {request.request_id} arrives at {t} before now={self.now}")
        self.step_until(t)
        index = self._router.choose(request, self.replicas)
        self.replicas[index].submit(request, first_token_s)
        return index

    def step_until(self, t: float) -> None:
        """Run every replica's iterations that start before `t` (math.inf: until all work is done)."""
        for r in self.replicas:
            r.step_until(t)
        if math.isfinite(t):
            self.now = max(self.now, t)

    def abort(self, request_id: int) -> bool:
        """Stop a request wherever it is; it shows up in collect() as ``cancelled``. False if it is unknown."""
        return any(r.abort(request_id) for r in self.replicas)

    def progress(self) -> dict[int, int]:
        """Output tokens generated so far by each running request, over all replicas."""
        merged: dict[int, int] = {}
        for r in self.replicas:
            merged.update(r.progress())
        return merged

    def collect(self) -> list[FinishedRequest]:
        """Requests finished since the last call, ordered by finish time then id."""
        done = [f for r in self.replicas for f in r.collect()]
        done.sort(key=lambda f: (f.finish_s, f.request_id))
        return done

    @property
    def idle(self) -> bool:
        return all(r.idle for r in self.replicas)

    @property
    def makespan_s(self) -> float:
        return max(r.now for r in self.replicas)

    def run(self, requests: Iterable[Request]) -> list[FinishedRequest]:
        """Offline: submit every request in arrival order, then drain. Returns all finished requests."""
        finished: list[FinishedRequest] = []
        for req in requests:
            self.submit(req)
        self.step_until(math.inf)
        finished += self.collect()
        return finished


def _replicas(cost: StepCost, dep: Deployment, cfg: EngineConfig, start: int, count: int) -> list[ReplicaEngine]:
    """`count` replicas of `dep`, packed onto instances; those on one instance share its host KV tier."""
    per_instance = max(1, dep.instance.chips // dep.chips)
    tiers = pooled(
        cfg.host_kv_gib if cfg.prefix_caching else 0.0, dep.kv_bytes_per_token, dep.chips, count, per_instance
    )
    return [ReplicaEngine(cost, dep.kv_capacity_tokens, cfg, start + i, dep, tier) for i, tier in enumerate(tiers)]
