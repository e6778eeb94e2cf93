from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switchyard.accelerator.sim.block_hashes import BlockChain, BlockIds
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.requests import FinishedRequest, Request

# ~6k KV tokens: small enough that random workloads hit admission limits, preemption and rejection.
DEPLOYMENT = make_deployment("meta-llama/Llama-2-13b-hf", "inf2.xlarge", 2)

requests = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=5, allow_nan=False),  # gap to the previous arrival
        st.integers(min_value=1, max_value=6000),  # prompt (some exceed the KV cache)
        st.integers(min_value=1, max_value=600),  # output
        st.sampled_from([None, "a", "b"]),  # shared prefix
        st.integers(min_value=0, max_value=3000),  # prefix length
        st.sampled_from([16, 32, 64, 48]),  # hash block tokens (48: not a whole number of 32- or 64-token pages)
    ),
    min_size=1,
    max_size=40,
)
configs = st.builds(
    EngineConfig,
    block_tokens=st.sampled_from([16, 32, 64]),
    max_batch=st.integers(min_value=1, max_value=12),
    max_batched_tokens=st.integers(min_value=64, max_value=4096),
    max_jump_steps=st.sampled_from([1, 7, 1024]),
    fair_share=st.booleans(),
    tenant_weights=st.sampled_from([(), (("t0", 3.0),)]),
    prefix_caching=st.booleans(),
)


def _build(spec: list[tuple[float, int, int, str | None, int, int]]) -> list[Request]:
    t, out = 0.0, []
    ids = BlockIds()
    for i, (gap, prompt, output, prefix, prefix_len, block_tokens) in enumerate(spec):
        t += gap
        chain = BlockChain(ids, block_tokens)
        if prefix is not None:
            chain.extend(prefix, min(prefix_len, prompt))
        chain.extend(("own", i), prompt - chain.tokens)
        out.append(
            Request(
                i,
                t,
                prompt,
                output,
                session=f"s{i % 3}",
                tenant=f"t{i % 2}",
                block_hashes=tuple(chain.hashes),
                hash_block_tokens=block_tokens,
                priority=2 if i % 5 == 0 else 1,
            )
        )
    return out


def _simulate(reqs: list[Request], config: EngineConfig, replicas: int, policy: str) -> list[FinishedRequest]:
    cluster = Cluster(DEPLOYMENT, replicas, policy, config=config, seed=1)
    finished: list[FinishedRequest] = []
    for req in reqs:
        cluster.submit(req)
        for r in cluster.replicas:
            r.check_invariants()
    horizon = reqs[-1].arrival_s
    while not cluster.idle:
        horizon += 0.25
        cluster.step_until(horizon)
        for r in cluster.replicas:
            r.check_invariants()
        finished += cluster.collect()
    finished += cluster.collect()
    for r in cluster.replicas:
        assert sum(f.chip_us for f in finished if f.replica == r.index) == r.chip_us_total
    return finished


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=requests,
    config=configs,
    replicas=st.integers(min_value=1, max_value=3),
    policy=st.sampled_from(["round_robin", "least_load", "prefix_affinity", "slo_aware", "random", "kv_aware"]),
)
def test_engine_invariants_hold_for_any_workload(
    spec: list[tuple[float, int, int, str | None, int, int]], config: EngineConfig, replicas: int, policy: str
) -> None:
    reqs = _build(spec)
    finished = _simulate(reqs, config, replicas, policy)
    assert sorted(f.request_id for f in finished) == [r.request_id for r in reqs]  # each finishes once
    capacity = DEPLOYMENT.kv_capacity_tokens // config.block_tokens * config.block_tokens
    for f in finished:
        r = reqs[f.request_id]
        if f.rejected is None:
            assert f.output_tokens == r.output_tokens  # tokens conserved
            assert f.arrival_s <= f.scheduled_s <= f.first_token_s <= f.finish_s
            assert f.cached_tokens <= r.prompt_tokens - 1
        else:
            assert r.prompt_tokens + r.output_tokens > capacity
    assert finished == _simulate(reqs, config, replicas, policy)  # deterministic
