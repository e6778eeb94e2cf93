from __future__ import annotations

import itertools
import math
from collections import Counter

from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.workloads import agentic_workload


def _without_prefixes(reqs: list[Request]) -> list[Request]:
    return [Request(r.request_id, r.arrival_s, r.prompt_tokens, r.output_tokens, r.session) for r in reqs]


def test_shared_system_prompts_are_computed_once_and_cut_ttft() -> None:
    dep = make_deployment("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8)
    reqs = agentic_workload(60, session_rate_per_s=2.0, agents=2, system_prompt_tokens=4096, seed=1)
    cached = Cluster(dep, 2, "prefix_affinity").run(reqs)
    plain = Cluster(dep, 2, "prefix_affinity").run(_without_prefixes(reqs))
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
    reqs = [
        Request(i, i * 0.2, 1500, 50, prefix_id=f"p{(i // 40) * 3 + i % 3}", prefix_tokens=1024) for i in range(140)
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
    assert sum(f.cached_tokens for f in finished) > 0
    assert sum(f.cached_tokens for f in finished) >= 100 * 1024
    assert len(replica.prefixes) < 12  # the 12 prefixes never all fit: some were evicted
    assert replica.check_invariants() is None


def test_slo_aware_routing_avoids_the_replica_with_a_prefill_backlog() -> None:
    dep = make_deployment("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8)
    cluster = Cluster(dep, 3, "slo_aware")
    first = cluster.submit(Request(0, 0.0, 30000, 10))
    second = cluster.submit(Request(1, 0.0, 200, 10))
    third = cluster.submit(Request(2, 0.0, 200, 10))
    assert len({first, second, third}) == 3
    cluster.step_until(math.inf)
    assert len(cluster.collect()) == 3


def test_agentic_sessions_grow_their_context_and_share_agent_prefixes() -> None:
    reqs = agentic_workload(30, session_rate_per_s=1.0, agents=3, system_prompt_tokens=1000, seed=2)
    assert [r.request_id for r in reqs] == list(range(len(reqs)))
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(reqs))
    per_session: dict[str, list[Request]] = {}
    for r in reqs:
        per_session.setdefault(str(r.session), []).append(r)
        assert r.prefix_tokens == 1000 < r.prompt_tokens
    assert any(len(turns) > 1 for turns in per_session.values())
    for turns in per_session.values():
        assert all(a.prompt_tokens < b.prompt_tokens for a, b in itertools.pairwise(turns))
        assert len({t.prefix_id for t in turns}) == 1
    assert len(Counter(r.prefix_id for r in reqs)) == 3
