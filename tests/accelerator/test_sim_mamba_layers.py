"""Mamba-2 layers (GraniteMoeHybrid's `layer_types` "mamba" with its mamba_* fields): no KV cache, a recurrence charged
per token and a per-sequence state that is read every pass and reserved out of the KV cache."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.accelerator.errors import ConfigurationError, DoesNotFitError
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hf_config import from_hf_config
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.point import simulate_point
from switchyard.accelerator.sim.stepcost import StepCost
from tests.accelerator.hf_configs import DENSE, step_s

# three Mamba-2 layers, then one attention layer (GraniteMoeHybrid's names), granite-4.0-h's Mamba-2 shape
MAMBA: dict[str, Any] = DENSE | {
    "layer_types": ["mamba", "mamba", "mamba", "attention"] * 8,
    "mamba_n_heads": 128,
    "mamba_d_head": 64,
    "mamba_d_state": 128,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
}


def test_mamba_layers_count_their_projections_and_keep_a_state_instead_of_a_kv_cache() -> None:
    full, hybrid = from_hf_config("m", DENSE), from_hf_config("m", MAMBA)
    assert hybrid.layer_types[:4] == ("mamba", "mamba", "mamba", "full_attention")  # "attention" is full attention
    assert (hybrid.mamba_layers, hybrid.attention_layers, hybrid.linear_attention_layers) == (24, 8, 0)
    assert hybrid.kv_elements_per_token() == full.kv_elements_per_token() // 4  # only the attention layers cache
    inner, conv_channels, d = 128 * 64, 128 * 64 + 2 * 128, 4096
    # in_proj (z, x, B, C, one dt per head), the depthwise convolution over x, B and C, out_proj
    mamba = d * (inner + conv_channels + 128) + conv_channels * 4 + inner * d
    assert hybrid.mamba_params() == mamba
    attention = 2 * d * 32 * 128 + 2 * d * 8 * 128
    assert hybrid.total_params() == 24 * mamba + 8 * attention + 32 * 3 * d * 14336 + 2 * 128256 * d
    # per layer: a head_dim x d_state state per head and the convolution's last 3 inputs
    assert hybrid.mamba_state_elements() == 24 * (128 * 64 * 128 + conv_channels * 3)
    # per head and token: the state's decay, the rank-one update and the read-out
    assert hybrid.mamba_flops_per_token() == 24 * 128 * 5 * 64 * 128


def test_mamba_layers_cost_the_same_at_any_context_and_each_sequence_reads_its_state() -> None:
    growth = step_s(MAMBA, [8192], "p5.48xlarge", 2) - step_s(MAMBA, [4096], "p5.48xlarge", 2)
    full_growth = step_s(DENSE, [8192], "p5.48xlarge", 2) - step_s(DENSE, [4096], "p5.48xlarge", 2)
    assert growth == pytest.approx(full_growth / 4, rel=1e-9)  # only the 8 attention layers grow with the context
    dep = make_deployment(from_hf_config("m", MAMBA), "p5.48xlarge", 2)
    assert dep.state_bytes_per_sequence == dep.model.mamba_state_elements() * 4  # FP32
    assert dep.attention_flops_per_qk == 4.0 * 32 * 128 * 8
    always, _ = dep.model.layer_params(dep.heads, dep.kv_heads)
    assert dep.linear_flops_per_token == 2.0 * (always + dep.model.lm_head_params()) + dep.model.mamba_flops_per_token()
    _, coeffs = coefficients_for(dep.instance)
    one, two = (StepCost(dep, coeffs).iteration_s(0, 0.0, 0.0, [4096] * b) for b in (1, 2))
    state_s = dep.state_bytes_per_sequence * coeffs.decode.inv_mbu / dep.hbm_bandwidth_bytes_per_s
    assert two - one > state_s > 0


@pytest.mark.parametrize(("instance", "tp"), [("p5.48xlarge", 2), ("trn2.48xlarge", 8)])
def test_a_larger_mamba_state_costs_each_decoding_sequence_more_and_holds_less_kv(instance: str, tp: int) -> None:
    small, large = (MAMBA | {"mamba_d_state": n} for n in (64, 128))
    deps = [make_deployment(from_hf_config("m", c), instance, tp) for c in (small, large)]
    ssm = 24 * 128 * 64 * 64 * 4  # the FP32 state d_state=64 adds, besides its convolution inputs
    assert deps[1].state_bytes_per_sequence - deps[0].state_bytes_per_sequence == ssm + 24 * 2 * 64 * 3 * 4
    # a second sequence adds its state's read (and recurrence): more for the larger state
    extra = [step_s(c, [1024] * 8, instance, tp) - step_s(c, [1024] * 4, instance, tp) for c in (small, large)]
    assert extra[1] > extra[0] > 0
    # and its state is reserved out of the KV cache, per batch slot
    assert deps[1].state_tokens(16) > deps[0].state_tokens(16) > 0
    blocks = [Cluster(d, 1, config=EngineConfig(max_batch=16)).replicas[0].total_blocks for d in deps]
    assert blocks[0] > blocks[1]


def test_a_batch_whose_kv_fits_but_not_beside_its_mamba_state_is_refused() -> None:
    dep = make_deployment(from_hf_config("m", MAMBA), "p5.48xlarge", 2)
    room = dep.kv_capacity_tokens - dep.state_tokens(1)
    simulate_point(dep.model, "p5.48xlarge", 2, batch=1, input_len=room - 8, output_len=8)
    with pytest.raises(DoesNotFitError, match="at most batch 0 fits"):
        simulate_point(dep.model, "p5.48xlarge", 2, batch=1, input_len=room - 7, output_len=8)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"mamba_d_state": None}, "mamba layers need the fields"),
        ({"mamba_expand": 1}, "mamba_n_heads x mamba_d_head is not mamba_expand x hidden_size"),
    ],
)
def test_mamba_layers_without_a_consistent_shape_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        from_hf_config("m", MAMBA | fields)


def test_granite_4_0_h_small_has_its_trainium_ports_layers_and_state_buffers() -> None:
    model = get_model("ibm-granite/granite-4.0-h-small")
    assert (model.mamba_layers, model.attention_layers) == (36, 4)
    assert [i for i, t in enumerate(model.layer_types) if t == "full_attention"] == [5, 15, 25, 35]
    # the NxD Inference port's buffers per Mamba layer: conv_state [8448, 3], ssm_state [128, 64, 128]
    assert model.mamba_state_elements() == 36 * (8448 * 3 + 128 * 64 * 128)
    assert model.kv_elements_per_token() == 4 * 2 * 8 * 128
    # every layer has 72 experts of 768 (top-10) and a shared expert of 1,536: two of the routed width
    assert (model.moe_layers, model.num_experts, model.experts_per_token) == (40, 72, 10)
    assert (model.moe_intermediate_size, model.shared_experts) == (768, 2)
    assert model.total_params() / 1e9 == pytest.approx(32.0, rel=0.02)  # IBM: 32B total, 9B activated
    assert model.active_params() / 1e9 == pytest.approx(9.0, rel=0.03)
