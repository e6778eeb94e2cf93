"""The engine's fast paths give the step-by-step results: decode-only stretches that run on across other replicas'
arrivals, prefill iterations that split chip-µs per chunk rather than per decode."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switchyard.accelerator.sim.attribution import attribute_chip_us, attribute_chunks_and_decodes
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import Deployment, make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.requests import FinishedRequest, Request

GPU = make_deployment("meta-llama/Llama-2-70b-hf", "p5.48xlarge", 2)
NEURON = make_deployment("meta-llama/Meta-Llama-3-8B", "trn1.32xlarge", 32)
TIGHT = make_deployment("meta-llama/Llama-2-13b-hf", "inf2.xlarge", 2)  # ~6k KV tokens: preemption


def _poisson(n: int, rate: float, seed: int, max_prompt: int = 3000, max_out: int = 800) -> list[Request]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        out.append(Request(i, t, rng.randint(1, max_prompt), rng.randint(1, max_out), session=f"s{i % 7}"))
    return out


def _run(
    dep: Deployment, reqs: list[Request], config: EngineConfig, policy: str, settle_every_s: float = 0.0
) -> tuple[Cluster, list[FinishedRequest]]:
    """Serve `reqs`; with `settle_every_s`, look at every replica's sequences at that period (which writes any
    decode stretch in flight into them and plans again from there: the engine as it stepped before)."""
    cluster = Cluster(dep, 4, policy, config=config, seed=3)
    tick = 0.0
    for req in reqs:
        while settle_every_s and tick + settle_every_s < req.arrival_s:
            tick += settle_every_s
            cluster.step_until(tick)
            for r in cluster.replicas:
                r.check_invariants()
        cluster.submit(req)
    while settle_every_s and not cluster.idle:
        tick += settle_every_s
        cluster.step_until(tick)
        for r in cluster.replicas:
            r.check_invariants()
    cluster.step_until(float("inf"))
    finished = sorted(cluster.collect(), key=lambda f: f.request_id)
    for r in cluster.replicas:
        assert sum(f.chip_us for f in finished if f.replica == r.index) == r.chip_us_total  # exact attribution
    return cluster, finished


def _same_timings(a: list[FinishedRequest], b: list[FinishedRequest]) -> None:
    assert [f.request_id for f in a] == [f.request_id for f in b]
    for x, y in zip(a, b, strict=True):
        assert x.replica == y.replica
        assert x.preemptions == y.preemptions
        assert x.output_tokens == y.output_tokens
        assert x.first_token_s == pytest.approx(y.first_token_s, rel=1e-9)
        assert x.finish_s == pytest.approx(y.finish_s, rel=1e-9)
        assert x.chip_us == pytest.approx(y.chip_us, rel=1e-3, abs=50)


@pytest.mark.parametrize(
    ("dep", "policy", "config"),
    [
        (GPU, "round_robin", EngineConfig(max_batch=128, max_batched_tokens=512)),  # the Vidur comparison's shape
        (GPU, "least_load", EngineConfig(max_batch=128, max_batched_tokens=512)),
        (NEURON, "slo_aware", EngineConfig()),
        (TIGHT, "least_load", EngineConfig(max_batch=16, max_batched_tokens=1024)),
    ],
    ids=["gpu-round-robin", "gpu-least-load", "neuron-slo-aware", "tight-preempting"],
)
def test_stretches_and_chunked_iterations_match_single_steps(
    dep: Deployment, policy: str, config: EngineConfig
) -> None:
    reqs = _poisson(160, rate=4.0, seed=11, max_prompt=2500 if dep is TIGHT else 3000)
    fast_cluster, fast = _run(dep, reqs, config, policy)
    single = EngineConfig(max_batch=config.max_batch, max_batched_tokens=config.max_batched_tokens, max_jump_steps=1)
    step_cluster, stepped = _run(dep, reqs, single, policy)
    _same_timings(fast, stepped)
    for x, y in zip(fast_cluster.replicas, step_cluster.replicas, strict=True):
        assert x.iterations == y.iterations
        assert x.busy_s == pytest.approx(y.busy_s, rel=1e-9)
        assert abs(x.chip_us_total - y.chip_us_total) <= 1
    if dep is TIGHT:
        assert sum(f.preemptions for f in fast) > 0  # the scenario does preempt


def test_a_stretch_runs_on_across_arrivals_elsewhere_as_if_settled_at_each() -> None:
    reqs = _poisson(200, rate=6.0, seed=5)
    config = EngineConfig(max_batch=128, max_batched_tokens=512)
    lazy_cluster, lazy = _run(GPU, reqs, config, "round_robin")
    _, settled = _run(GPU, reqs, config, "round_robin", settle_every_s=0.05)
    _same_timings(lazy, settled)
    # stretches were long: far fewer decode plans than decode iterations
    assert sum(r.iterations for r in lazy_cluster.replicas) > 5 * len(reqs)


def test_progress_mid_stretch_counts_the_tokens_of_the_iterations_that_ran() -> None:
    reqs = [Request(0, 0.0, 100, 500), Request(1, 0.0, 200, 400)]
    fast = Cluster(NEURON, 1, config=EngineConfig())
    single = Cluster(NEURON, 1, config=EngineConfig(max_jump_steps=1))
    for cluster in (fast, single):
        for req in reqs:
            cluster.submit(req)
    for t in (0.05, 0.5, 1.7, 3.0):
        fast.step_until(t)
        single.step_until(t)
        assert fast.progress() == single.progress()
        assert fast.replicas[0].now == pytest.approx(single.replicas[0].now, rel=1e-9)
    assert 0 < fast.progress()[0] < 500


@given(
    total=st.integers(min_value=0, max_value=10**9),
    chunks=st.lists(st.integers(min_value=1, max_value=4096), max_size=6),
    decodes=st.integers(min_value=0, max_value=300),
)
def test_the_per_chunk_split_is_the_largest_remainder_split(total: int, chunks: list[int], decodes: int) -> None:
    if not chunks and not decodes:
        total = 0
    parts, one, extra = attribute_chunks_and_decodes(total, chunks, decodes)
    expected = attribute_chip_us(total, [*chunks, *[1] * decodes])
    assert parts == expected[: len(chunks)]
    assert [one + 1] * extra + [one] * (decodes - extra) == expected[len(chunks) :]


def test_an_abort_mid_stretch_stops_where_single_steps_would() -> None:
    reqs = [Request(i, 0.01 * i, 300 + 50 * i, 400) for i in range(6)]
    results = []
    for steps in (1024, 1):
        cluster = Cluster(NEURON, 1, config=EngineConfig(max_jump_steps=steps))
        for req in reqs:
            cluster.submit(req)
        cluster.step_until(2.0)
        assert cluster.abort(3)
        cluster.step_until(float("inf"))
        finished = sorted(cluster.collect(), key=lambda f: f.request_id)
        assert sum(f.chip_us for f in finished) == cluster.replicas[0].chip_us_total
        cluster.replicas[0].check_invariants()
        results.append(finished)
    fast, single = results
    assert fast[3].cancelled
    assert 0 < fast[3].output_tokens < 400
    _same_timings(fast, single)
