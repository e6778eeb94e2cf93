"""Cluster routing policies, picked from an enum-keyed factory."""

from __future__ import annotations

import enum
import random
import zlib
from collections.abc import Callable, Sequence
from typing import Protocol

from switchyard.accelerator.sim.engine import ReplicaEngine
from switchyard.accelerator.sim.kv_router import KvAwareRouter
from switchyard.accelerator.sim.requests import Request

__all__ = ["Router", "RoutingPolicy", "make_router"]


class RoutingPolicy(enum.StrEnum):
    """How a cluster picks the replica for a new request."""

    ROUND_ROBIN = "round_robin"
    LEAST_LOAD = "least_load"  # least estimated work (outstanding tokens x the replica's seconds per token)
    SESSION_AFFINITY = "session_affinity"  # same session -> same replica (KV/prefix reuse), else least load
    PREFIX_AFFINITY = "prefix_affinity"  # same first prompt block (else session) -> same replica, else least load
    KV_AWARE = "kv_aware"  # shortest estimated TTFT given the prefix each replica caches and its load (kv_router.py)
    SLO_AWARE = "slo_aware"  # least prefill backlog: the replica where the new prompt's TTFT is shortest
    RANDOM = "random"  # seeded uniform choice


class Router(Protocol):
    def choose(self, request: Request, replicas: Sequence[ReplicaEngine]) -> int: ...


class _RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def choose(self, request: Request, replicas: Sequence[ReplicaEngine]) -> int:
        i = self._next % len(replicas)
        self._next = i + 1
        return i


def _least_loaded(replicas: Sequence[ReplicaEngine]) -> int:
    best, best_load = 0, replicas[0].load_s
    for i in range(1, len(replicas)):
        load = replicas[i].load_s
        if load < best_load:
            best, best_load = i, load
    return best


class _LeastLoad:
    def choose(self, request: Request, replicas: Sequence[ReplicaEngine]) -> int:
        return _least_loaded(replicas)


class _SessionAffinity:
    def choose(self, request: Request, replicas: Sequence[ReplicaEngine]) -> int:
        if request.session is None:
            return _least_loaded(replicas)
        return zlib.crc32(request.session.encode()) % len(replicas)  # stable across processes


class _PrefixAffinity:
    def choose(self, request: Request, replicas: Sequence[ReplicaEngine]) -> int:
        key = str(request.block_hashes[0]) if request.block_hashes else request.session
        if key is None:
            return _least_loaded(replicas)
        return zlib.crc32(key.encode()) % len(replicas)


class _SloAware:
    """Replicas are identical, so the shortest predicted TTFT is behind the smallest prefill backlog;
    ties go to the least loaded (fewest outstanding tokens), then the lowest index."""

    def choose(self, request: Request, replicas: Sequence[ReplicaEngine]) -> int:
        return min(
            range(len(replicas)), key=lambda i: (replicas[i].prefill_backlog_tokens, replicas[i].outstanding_tokens, i)
        )


class _Random:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def choose(self, request: Request, replicas: Sequence[ReplicaEngine]) -> int:
        return self._rng.randrange(len(replicas))


_FACTORY: dict[RoutingPolicy, Callable[[random.Random], Router]] = {
    RoutingPolicy.ROUND_ROBIN: lambda rng: _RoundRobin(),
    RoutingPolicy.LEAST_LOAD: lambda rng: _LeastLoad(),
    RoutingPolicy.SESSION_AFFINITY: lambda rng: _SessionAffinity(),
    RoutingPolicy.PREFIX_AFFINITY: lambda rng: _PrefixAffinity(),
    RoutingPolicy.KV_AWARE: lambda rng: KvAwareRouter(),
    RoutingPolicy.SLO_AWARE: lambda rng: _SloAware(),
    RoutingPolicy.RANDOM: _Random,
}


def make_router(policy: RoutingPolicy | str, seed: int = 0) -> Router:
    """A fresh router for `policy`; randomised policies draw from a generator seeded with `seed`."""
    return _FACTORY[RoutingPolicy(policy)](random.Random(seed))
