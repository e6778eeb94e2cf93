from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

from switchyard.accelerator.sim.block_hashes import BlockChain, BlockIds
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.prefix_cache import PrefixCache
from switchyard.accelerator.sim.prefix_calibration import fit_prefix_caching, prefix_caching_cost
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.workloads import agentic_workload

DEP_8B = make_deployment("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8)


def _hashes(ids: BlockIds, *segments: tuple[object, int], block_tokens: int = 32) -> list[int]:
    chain = BlockChain(ids, block_tokens)
    for segment, tokens in segments:
        chain.extend(segment, tokens)
    return chain.hashes


def test_a_blocks_key_changes_when_any_earlier_token_changes() -> None:
    ids = BlockIds()
    base = _hashes(ids, ("system", 100), ("user-a", 100))
    assert len(base) == 6  # only full 32-token blocks get an id
    assert _hashes(ids, ("system", 100), ("user-a", 100)) == base  # same tokens, same ids
    changed_late = _hashes(ids, ("system", 100), ("user-b", 100))
    assert changed_late[:3] == base[:3]  # blocks wholly before the change keep their ids
    assert all(a != b for a, b in zip(changed_late[3:], base[3:], strict=True))  # the straddling one and after
    changed_first = _hashes(ids, ("other", 100), ("user-a", 100))
    assert not set(changed_first) & set(base)  # even block 5, whose own tokens are equal, depends on block 0


def test_lru_eviction_frees_unread_blocks_oldest_first_and_never_pinned_ones() -> None:
    cache = PrefixCache()
    a, b, c = cache.insert(1, 4), cache.insert(2, 4), cache.insert(3, 4)
    assert cache.evict(100) == 0  # every block is pinned by the sequence that computed it
    cache.release([a])
    cache.release([c])  # c released last: most recently used
    assert cache.evictable_pages == 8
    assert cache.evict(1) == 4
    assert 1 not in cache
    assert 3 in cache
    assert 2 in cache
    cache.acquire([c])  # read again: pinned
    assert cache.evict(100) == 0
    assert cache.held_pages == 8
    cache.release([b, c])
    assert cache.evict(4) == 4
    assert 3 not in cache


def test_a_session_reuses_its_history_and_prefill_costs_less_with_hits() -> None:
    ids = BlockIds()
    first = _hashes(ids, ("system", 4096), ("turn-1", 300))
    second = _hashes(ids, ("system", 4096), ("turn-1", 300), ("answer-1", 100), ("turn-2", 300))
    warm = Cluster(DEP_8B, 1)
    warm.submit(Request(0, 0.0, 4396, 100, block_hashes=tuple(first)))
    warm.step_until(30.0)
    warm.collect()
    warm.submit(Request(1, 30.0, 4796, 50, block_hashes=tuple(second)))
    warm.step_until(math.inf)
    (hit,) = warm.collect()
    cold = Cluster(DEP_8B, 1).run([Request(1, 30.0, 4796, 50, block_hashes=tuple(second))])[0]
    assert hit.cached_blocks == 4396 // 32
    assert hit.cached_tokens == 4396 // 32 * 32
    assert cold.cached_tokens == 0
    assert hit.ttft_ms < cold.ttft_ms / 3
    assert hit.chip_us < cold.chip_us
    # the chip-time the cache saved is estimated from the linear part of prefill: never more than it really saved
    assert 0.5 * (cold.chip_us - hit.chip_us) < hit.cache_saved_chip_us <= cold.chip_us - hit.chip_us
    assert cold.cache_saved_chip_us == 0


def test_at_least_one_prompt_token_is_computed_even_when_every_block_is_cached() -> None:
    hashes = tuple(range(64))
    finished = Cluster(DEP_8B, 1).run(
        [Request(0, 0.0, 2048, 5, block_hashes=hashes), Request(1, 9.0, 2048, 5, block_hashes=hashes)]
    )
    assert finished[1].cached_tokens == 2048 - 32  # the last block is recomputed: the first token needs a pass
    assert finished[1].first_token_s > finished[1].arrival_s


def test_without_hits_the_block_layout_costs_its_calibrated_overhead() -> None:
    req = Request(0, 0.0, 4000, 1, block_hashes=tuple(range(125)))
    on = Cluster(DEP_8B, 1).run([req])[0]
    off = Cluster(DEP_8B, 1, config=EngineConfig(prefix_caching=False)).run([req])[0]
    assert on.ttft_ms / off.ttft_ms == pytest.approx(prefix_caching_cost().block_layout_overhead, rel=1e-9)


def test_the_fit_reproduces_the_published_on_off_ratios() -> None:
    cost, rows = fit_prefix_caching()
    by_set = {r.dataset: r for r in rows}
    assert by_set["math.math"].measured_speedup == pytest.approx(3.18, abs=0.01)
    assert by_set["math.math"].predicted_speedup == pytest.approx(3.18, rel=0.1)
    assert by_set["HumanEval"].predicted_speedup == pytest.approx(0.98, abs=0.005)
    assert 1.0 < cost.block_layout_overhead < 1.05
    assert 0.0 <= cost.cached_token_share < 1.0


def test_shared_system_prompts_and_histories_are_computed_once_and_cut_ttft() -> None:
    reqs = agentic_workload(60, session_rate_per_s=2.0, agents=2, system_prompt_tokens=4096, seed=1)
    cached = Cluster(DEP_8B, 2, "prefix_affinity").run(reqs)
    plain = Cluster(DEP_8B, 2, "prefix_affinity", config=EngineConfig(prefix_caching=False)).run(reqs)
    assert sum(f.cached_tokens for f in plain) == 0
    reused = sum(f.cached_tokens for f in cached)
    assert reused >= (len(reqs) - 2 * 2) * 4096 * 0.9  # nearly every request but the first per agent/replica hits
    assert sum(f.chip_us for f in cached) < sum(f.chip_us for f in plain)
    by_id = {f.request_id: f for f in plain}
    faster = sum(1 for f in cached if f.ttft_ms < by_id[f.request_id].ttft_ms)
    assert faster > len(reqs) * 0.8
    for f in cached:
        assert f.output_tokens == reqs[f.request_id].output_tokens


def test_prefix_blocks_are_accounted_and_evicted_under_memory_pressure() -> None:
    # 13B on two NeuronCores leaves ~6k KV tokens. Every 40 requests the working set moves to three new
    # 1k-token prefixes, so old ones must be evicted to admit work.
    dep = make_deployment("meta-llama/Llama-2-13b-hf", "inf2.xlarge", 2)
    ids = BlockIds()
    reqs = [
        Request(i, i * 0.2, 1500, 50, block_hashes=tuple(_hashes(ids, (f"p{(i // 40) * 3 + i % 3}", 1024))))
        for i in range(140)
    ]
    cluster = Cluster(dep, 1, config=EngineConfig(max_batch=8))
    replica = cluster.replicas[0]
    finished = []
    t = 0.0
    for req in reqs:
        cluster.submit(req)
        replica.check_invariants()
    while not cluster.idle:
        t += 0.1
        cluster.step_until(t)
        replica.check_invariants()
        finished += cluster.collect()
    finished += cluster.collect()
    assert sorted(f.request_id for f in finished) == list(range(140))
    assert all(f.output_tokens == 50 for f in finished)
    assert sum(f.cached_tokens for f in finished) >= 100 * 1024
    assert len(replica.prefixes) < 12 * 32  # the 12 prefixes' blocks never all fit: some were evicted


def test_agentic_sessions_resend_their_history_as_a_growing_shared_prefix() -> None:
    reqs = agentic_workload(30, session_rate_per_s=1.0, agents=3, system_prompt_tokens=1000, seed=2)
    assert [r.request_id for r in reqs] == list(range(len(reqs)))
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(reqs))
    per_session: dict[str, list[Request]] = {}
    for r in reqs:
        per_session.setdefault(str(r.session), []).append(r)
        assert len(r.block_hashes) == r.prompt_tokens // 32
    assert any(len(turns) > 1 for turns in per_session.values())
    for turns in per_session.values():
        for a, b in itertools.pairwise(turns):
            assert a.prompt_tokens < b.prompt_tokens
            # turn n+1 starts with turn n's whole prompt (and its answer): every full block of it is shared
            assert b.block_hashes[: len(a.block_hashes)] == a.block_hashes
    system_blocks = Counter(r.block_hashes[: 1000 // 32] for r in reqs)
    assert len(system_blocks) == 3  # one system prompt per agent
