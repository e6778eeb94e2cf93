"""The KV tier in host memory: blocks the device cache evicts are kept there, loaded back instead of recomputed,
and shared by the replicas of one instance."""

from __future__ import annotations

import math

from switchyard.accelerator.sim.block_hashes import BlockChain, BlockIds
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.kv_router import KvAwareRouter
from switchyard.accelerator.sim.requests import FinishedRequest, Request

DEP_70B = make_deployment("meta-llama/Llama-3.1-70B", "trn2.48xlarge", 8)  # ~135k tokens of KV per replica


def _hashes(ids: BlockIds, *segments: tuple[object, int]) -> tuple[int, ...]:
    chain = BlockChain(ids, 32)
    for segment, tokens in segments:
        chain.extend(segment, tokens)
    return tuple(chain.hashes)


def _second_visit(host_kv_gib: float, *, flood: bool) -> FinishedRequest:
    """A prompt served once, then (after other prompts filled the device cache, if `flood`) served again."""
    ids = BlockIds()
    prefix = ("document", 8192)
    cluster = Cluster(DEP_70B, 1, config=EngineConfig(host_kv_gib=host_kv_gib))
    cluster.submit(Request(0, 0.0, 8292, 10, block_hashes=_hashes(ids, prefix, ("question-1", 100))))
    t = 0.0
    for n in range(20 if flood else 0):  # 160k tokens of other prompts, one after another: more than the device holds
        t += 30.0
        cluster.submit(Request(1 + n, t, 8000, 10, block_hashes=_hashes(ids, (f"other-{n}", 8000))))
    t += 30.0
    cluster.submit(Request(99, t, 8292, 10, block_hashes=_hashes(ids, prefix, ("question-2", 100))))
    cluster.step_until(math.inf)
    return next(f for f in cluster.collect() if f.request_id == 99)


def test_an_evicted_prefix_is_loaded_back_from_host_memory_instead_of_recomputed() -> None:
    without_tier = _second_visit(0.0, flood=True)
    with_tier = _second_visit(16.0, flood=True)
    on_device = _second_visit(16.0, flood=False)
    assert without_tier.cached_tokens == 0  # the device evicted it: computed again
    assert with_tier.cached_tokens == on_device.cached_tokens == 8192
    assert with_tier.ttft_ms < without_tier.ttft_ms / 3
    assert with_tier.ttft_ms > on_device.ttft_ms  # the load over the host link is not free


def test_replicas_on_one_instance_share_one_host_tier_of_their_summed_size() -> None:
    config = EngineConfig(host_kv_gib=4.0)
    one_instance = Cluster(DEP_70B, 8, config=config).replicas  # 8 replicas of 2 chips fill a 16-chip instance
    assert all(r.host is one_instance[0].host for r in one_instance)
    per_token = DEP_70B.kv_bytes_per_token
    assert one_instance[0].host is not None
    assert one_instance[0].host.capacity_tokens == int(8 * 4.0 * 2**30 // per_token)
    two_instances = Cluster(DEP_70B, 9, config=config).replicas
    assert two_instances[8].host is not two_instances[0].host
    assert two_instances[8].host is not None
    assert two_instances[8].host.capacity_tokens == int(4.0 * 2**30 // per_token)
    assert Cluster(DEP_70B, 2).replicas[0].host is None  # off by default
    assert Cluster(DEP_70B, 2, config=EngineConfig(host_kv_gib=4.0, prefix_caching=False)).replicas[0].host is None


def test_the_kv_aware_router_counts_blocks_in_the_instances_host_tier_as_cached_on_every_replica_there() -> None:
    replicas = Cluster(DEP_70B, 2, config=EngineConfig(host_kv_gib=4.0)).replicas
    hashes = _hashes(BlockIds(), ("document", 4096), ("question", 100))
    request = Request(0, 0.0, 4196, 10, block_hashes=hashes)
    router = KvAwareRouter()
    assert [cached for _, cached in router.estimates(request, replicas)] == [0, 0]
    host = replicas[0].host
    assert host is not None
    for h in hashes[: 4096 // 32]:
        host.keep(h, 32)
    assert [cached for _, cached in router.estimates(request, replicas)] == [4096, 4096]
