from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.costmodel import MoeDispatch, bucket, forward_features, forward_time_s
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.hardware import get_instance
from switchyard.accelerator.sim.stepcost import StepCost


@pytest.mark.parametrize(
    ("model", "instance", "tp"),
    [
        ("meta-llama/Llama-2-70b-hf", "trn1.32xlarge", 32),  # static shapes
        ("Qwen/Qwen3-30B-A3B", "trn2.48xlarge", 16),  # MoE
        ("meta-llama/Llama-3.1-8B", "p5.48xlarge", 2),  # no padding
    ],
)
def test_engine_step_cost_matches_the_vectorised_cost_model(model: str, instance: str, tp: int) -> None:
    dep = make_deployment(model, instance, tp)
    _, coeffs = coefficients_for(dep.instance)
    cost = StepCost(dep, coeffs)
    static = dep.instance.chip.static_shapes
    # prefill of two chunks, 700 tokens in all, after 300 cached tokens
    n, ctx = 700, 300
    padded = float(bucket(n)[()]) if static else float(n)
    qk = n * (ctx + n)
    expected = float(forward_time_s(dep, coeffs.prefill, padded, qk, ctx, 2, moe=coeffs.moe_dispatch("prefill")))
    assert coeffs.prefill.prompt_overhead_s > 0
    assert cost.iteration_s(n, qk, ctx, [], 2) == pytest.approx(expected, rel=1e-12)
    # decode of 5 sequences with contexts around 1-3k
    contexts = [1000, 1500, 2100, 2900, 1234]
    if static:
        bb, cb = float(bucket(5, 1)[()]), float(bucket(max(contexts))[()])
        expected = float(forward_time_s(dep, coeffs.decode, bb, bb * cb, bb * cb, moe=coeffs.moe_dispatch("decode")))
    else:
        expected = float(forward_time_s(dep, coeffs.decode, 5.0, sum(contexts), sum(contexts)))
    assert cost.iteration_s(0, 0.0, 0.0, contexts) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("instance", ["trn1.32xlarge", "p5.48xlarge"])
def test_decode_jump_is_the_sum_of_single_steps(instance: str) -> None:
    dep = make_deployment("meta-llama/Llama-3.1-8B", instance, 8)
    _, coeffs = coefficients_for(dep.instance)
    cost = StepCost(dep, coeffs)
    contexts = [100, 4000, 4090, 17]
    steps = 300  # 4090 + 300 crosses the 4096-token context bucket on Neuron
    jump = cost.decode_jump_s(contexts, steps)
    singles = np.cumsum([cost.iteration_s(0, 0.0, 0.0, [c + j for c in contexts]) for j in range(steps)])
    np.testing.assert_allclose(jump, singles, rtol=1e-12)


@pytest.mark.parametrize("batch", [4, 15, 16, 40])  # 16 x 8 / 128 = 1: every expert from 16 sequences up
def test_moe_decode_on_nxd_inference_loads_each_tokens_experts_then_runs_every_expert(batch: int) -> None:
    dep = make_deployment("Qwen/Qwen3-30B-A3B", "p4de.24xlarge", 1)
    _, coeffs = coefficients_for(get_instance("trn2.48xlarge"))
    assert coeffs.moe_nxd
    cost = StepCost(dep, coeffs)  # NxD Inference's MoE dispatch on a GPU: no padding, so batch is exact
    contexts = [1000 + 7 * i for i in range(batch)]
    moe = coeffs.moe_dispatch("decode")
    assert moe is MoeDispatch.SELECTIVE
    expected = float(forward_time_s(dep, coeffs.decode, batch, sum(contexts), sum(contexts), moe=moe))
    assert cost.iteration_s(0, 0.0, 0.0, contexts) == pytest.approx(expected, rel=1e-12)
    jump = cost.decode_jump_s(contexts, 50)
    singles = np.cumsum([cost.iteration_s(0, 0.0, 0.0, [c + j for c in contexts]) for j in range(50)])
    np.testing.assert_allclose(jump, singles, rtol=1e-12)
    routed = float(forward_time_s(dep, coeffs.decode, batch, sum(contexts), sum(contexts)))
    if batch < 16:
        assert expected > routed  # batch x k expert loads, repeats included, against the distinct experts
    else:
        everything = forward_features(dep, batch, 0.0, 0.0, moe=MoeDispatch.ALL_EXPERTS)
        assert forward_features(dep, batch, 0.0, 0.0, moe=moe)[0] == pytest.approx(everything[0])


@pytest.mark.parametrize("batch", [1, 15, 16])  # 16 x 8 / 128 = 1: every expert runs, nothing is gathered
def test_gathering_each_tokens_experts_costs_their_bytes_beyond_reading_them_until_every_expert_runs(
    batch: int,
) -> None:
    dep = make_deployment("Qwen/Qwen3-30B-A3B", "p4de.24xlarge", 1)  # no padding: the batch is exact
    _, committed = coefficients_for(get_instance("trn2.48xlarge"))
    gather = 3.0
    coeffs = replace(committed, decode=replace(committed.decode, expert_gather_inv_mbu=gather))
    read_only = replace(committed, decode=replace(committed.decode, expert_gather_inv_mbu=0.0))
    cost, plain = StepCost(dep, coeffs), StepCost(dep, read_only)
    contexts = [1000 + 7 * i for i in range(batch)]
    moe = coeffs.moe_dispatch("decode")
    expected = float(forward_time_s(dep, coeffs.decode, batch, sum(contexts), sum(contexts), moe=moe))
    assert cost.iteration_s(0, 0.0, 0.0, contexts) == pytest.approx(expected, rel=1e-12)
    jump = cost.decode_jump_s(contexts, 20)
    singles = np.cumsum([cost.iteration_s(0, 0.0, 0.0, [c + j for c in contexts]) for j in range(20)])
    np.testing.assert_allclose(jump, singles, rtol=1e-12)
    m = dep.model
    gathered = dep.routed_weight_bytes * batch * m.experts_per_token / m.num_experts if batch < 16 else 0.0
    extra = cost.iteration_s(0, 0.0, 0.0, contexts) - plain.iteration_s(0, 0.0, 0.0, contexts)
    assert extra == pytest.approx(gather * gathered / dep.hbm_bandwidth_bytes_per_s, rel=1e-9, abs=1e-15)
    # prompts run every expert in one batched pass: nothing is gathered
    assert cost.iteration_s(512, 512.0**2, 512.0, [], 1) == plain.iteration_s(512, 512.0**2, 512.0, [], 1)
