from __future__ import annotations

import numpy as np
import pytest

from switchyard.accelerator.calibration_data import coefficients_for
from switchyard.accelerator.costmodel import bucket, forward_time_s
from switchyard.accelerator.deployment import make_deployment
from switchyard.accelerator.stepcost import StepCost


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
