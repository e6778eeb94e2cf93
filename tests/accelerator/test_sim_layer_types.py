"""Per-layer attention types (Hugging Face `layer_types`): sliding-window layers stop reading KV and computing
attention past their window, linear-attention layers keep a constant state instead of a KV cache."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from switchyard.accelerator.errors import ConfigurationError, DoesNotFitError
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.costmodel import bucket, forward_time_s, windowed
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hf_config import from_hf_config
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.point import simulate_point
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.stepcost import StepCost
from tests.accelerator.hf_configs import DENSE, SLIDING

# Qwen3.5-style hybrid: three Gated DeltaNet layers, then one full-attention layer with a gated output
HYBRID = DENSE | {
    "full_attention_interval": 4,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "attn_output_gate": True,
}


def _step_s(cfg: dict[str, Any], instance: str, tp: int, contexts: list[int]) -> float:
    dep = make_deployment(from_hf_config("m", cfg), instance, tp)
    _, coeffs = coefficients_for(dep.instance)
    return StepCost(dep, coeffs).iteration_s(0, 0.0, 0.0, contexts)


@pytest.mark.parametrize(("instance", "tp"), [("trn2.48xlarge", 8), ("p5.48xlarge", 2)])
def test_sliding_window_layers_stop_adding_decode_time_past_their_window(instance: str, tp: int) -> None:
    # Half the layers slide: past the window, a longer context costs half what it costs the all-full model.
    full_growth = _step_s(DENSE, instance, tp, [8192]) - _step_s(DENSE, instance, tp, [4096])
    sliding_growth = _step_s(SLIDING, instance, tp, [8192]) - _step_s(SLIDING, instance, tp, [4096])
    assert full_growth > 0
    assert sliding_growth == pytest.approx(full_growth / 2, rel=1e-9)
    # within the window both models are the same
    assert _step_s(SLIDING, instance, tp, [1000]) == pytest.approx(_step_s(DENSE, instance, tp, [1000]), rel=1e-12)


def test_layer_types_read_from_a_config_count_kv_and_parameters_per_layer_type() -> None:
    full, sliding, hybrid = (from_hf_config("m", c) for c in (DENSE, SLIDING, HYBRID))
    assert sliding.sliding_attention_layers == 16
    assert sliding.sliding_window == 1024
    assert sliding.kv_elements_per_token() == full.kv_elements_per_token()  # a sliding layer still caches
    assert sliding.window_kv_elements_per_token() == full.kv_elements_per_token() // 2
    assert sliding.total_params() == full.total_params()
    assert hybrid.layer_types == ("linear_attention",) * 3 + ("full_attention",) + hybrid.layer_types[4:]
    assert (hybrid.linear_attention_layers, hybrid.attention_layers) == (24, 8)
    assert hybrid.kv_elements_per_token() == full.kv_elements_per_token() // 4  # only full layers cache
    key_dim, value_dim, d = 16 * 128, 32 * 128, 4096
    gdn = d * (2 * key_dim + 2 * value_dim) + d * 2 * 32 + value_dim * d + (2 * key_dim + value_dim) * 4
    assert hybrid.linear_attention_params() == gdn
    gated_attention = 3 * d * 32 * 128 + 2 * d * 8 * 128  # q_proj carries the output gate
    mlp, embed = 3 * d * 14336, 2 * 128256 * d
    assert hybrid.total_params() == 24 * gdn + 8 * gated_attention + 32 * mlp + embed
    assert hybrid.linear_attention_state_elements() == 24 * (32 * 128 * 128 + (2 * key_dim + value_dim) * 3)


def test_linear_attention_layers_cost_the_same_at_any_context_but_their_state_per_sequence() -> None:
    dep = make_deployment(from_hf_config("m", HYBRID), "p5.48xlarge", 2)
    assert dep.state_bytes_per_sequence == dep.model.linear_attention_state_elements() * 4  # FP32 state
    assert dep.attention_flops_per_qk == 4.0 * 32 * 128 * 8  # softmax attention in the 8 full layers only
    growth = _step_s(HYBRID, "p5.48xlarge", 2, [8192]) - _step_s(HYBRID, "p5.48xlarge", 2, [4096])
    full_growth = _step_s(DENSE, "p5.48xlarge", 2, [8192]) - _step_s(DENSE, "p5.48xlarge", 2, [4096])
    assert growth == pytest.approx(full_growth / 4, rel=1e-9)
    # each decoding sequence reads its state: a second sequence at the same context adds the state's bytes
    _, coeffs = coefficients_for(dep.instance)
    one, two = (StepCost(dep, coeffs).iteration_s(0, 0.0, 0.0, [4096] * b) for b in (1, 2))
    state_s = dep.state_bytes_per_sequence * coeffs.decode.inv_mbu / dep.hbm_bandwidth_bytes_per_s
    assert two - one > state_s > 0
    assert dep.model.linear_attention_flops_per_token() == 24 * 32 * 6 * 128 * 128
    assert dep.linear_flops_per_token > 2.0 * dep.model.active_params()  # the recurrence is charged per token


@pytest.mark.parametrize("instance", ["trn2.48xlarge", "p5.48xlarge"])
def test_engine_step_cost_matches_the_vectorised_cost_model_with_a_sliding_window(instance: str) -> None:
    dep = make_deployment(from_hf_config("m", SLIDING), instance, 8)
    _, coeffs = coefficients_for(dep.instance)
    cost = StepCost(dep, coeffs)
    static = dep.instance.chip.static_shapes
    contexts = [500, 1500, 2100, 2900]
    if static:
        bb, cb = float(bucket(4, 1)[()]), float(bucket(max(contexts))[()])
        w = float(windowed(cb, 1024))
        expected = forward_time_s(dep, coeffs.decode, bb, bb * cb, bb * cb, window_qk=bb * w, window_kv=bb * w)
    else:
        w = float(sum(min(c, 1024) for c in contexts))
        expected = forward_time_s(dep, coeffs.decode, 4.0, sum(contexts), sum(contexts), window_qk=w, window_kv=w)
    assert cost.iteration_s(0, 0.0, 0.0, contexts) == pytest.approx(float(expected), rel=1e-12)
    jump = cost.decode_jump_s(contexts, 40)
    singles = np.cumsum([cost.iteration_s(0, 0.0, 0.0, [c + j for c in contexts]) for j in range(40)])
    np.testing.assert_allclose(jump, singles, rtol=1e-12)
    # a prefill chunk of 2,000 tokens after 3,000 cached: the window cuts both its attention and its KV read
    n, cached = 2000, 3000
    pt = float(bucket(n)[()]) if static else float(n)
    qk, wqk = float(n * (cached + n)), float(n * min(cached + n, 1024))
    expected = forward_time_s(dep, coeffs.prefill, pt, qk, cached, 1, window_qk=wqk, window_kv=1024, sequences=1)
    got = cost.iteration_s(n, qk, cached, [], 1, wqk, 1024.0)
    assert got == pytest.approx(float(expected), rel=1e-12)
    assert got < cost.iteration_s(n, qk, cached, [], 1)


def test_a_long_prompt_prefills_faster_with_sliding_window_layers_in_the_engine() -> None:
    def ttft_s(cfg: dict[str, Any]) -> float:
        dep = make_deployment(from_hf_config("m", cfg), "p5.48xlarge", 8)
        (done,) = Cluster(dep, 1, config=EngineConfig(max_batched_tokens=2048)).run([Request(0, 0.0, 32768, 4)])
        return done.first_token_s - done.arrival_s

    assert ttft_s(SLIDING) < 0.9 * ttft_s(DENSE)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"layer_types": ["full_attention"] * 31}, "each of its 32 layers"),
        ({"layer_types": ["chunked_attention"] * 32}, "each of its 32 layers"),
        ({"layer_types": ["sliding_attention"] * 32}, "need a sliding_window"),
        ({"layer_types": ["linear_attention"] * 32}, "linear_\\* head fields"),
    ],
)
def test_layer_types_that_cannot_be_modelled_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        from_hf_config("m", DENSE | fields)


def test_a_mistral_sliding_window_without_layer_types_keeps_full_attention() -> None:
    model = from_hf_config("m", DENSE | {"sliding_window": 4096})
    assert model.layer_types == ()
    assert model.sliding_window == 0
    assert model.attention_layers == 32


def test_gpt_oss_attends_to_a_128_token_window_in_every_other_layer() -> None:
    model = get_model("openai/gpt-oss-20b")
    assert model.layer_types == ("sliding_attention", "full_attention") * 12
    assert model.sliding_window == 128
    dep = make_deployment(model, "trn2.48xlarge", 8)
    assert dep.window_kv_bytes_per_token == dep.kv_bytes_per_token / 2
    _, coeffs = coefficients_for(dep.instance)
    windowed_growth = StepCost(dep, coeffs).iteration_s(0, 0.0, 0.0, [8192]) - StepCost(dep, coeffs).iteration_s(
        0, 0.0, 0.0, [4096]
    )
    full = make_deployment(replace(model, layer_types=(), sliding_window=0), "trn2.48xlarge", 8)
    full_growth = StepCost(full, coeffs).iteration_s(0, 0.0, 0.0, [8192]) - StepCost(full, coeffs).iteration_s(
        0, 0.0, 0.0, [4096]
    )
    assert windowed_growth == pytest.approx(full_growth / 2, rel=1e-9)


def test_qwen3_6_27b_resolves_to_the_hybrid_text_decoder_of_qwen3_5_27b() -> None:
    model = get_model("Qwen/Qwen3.6-27B")
    assert model.name == "Qwen/Qwen3.6-27B"
    assert (model.linear_attention_layers, model.attention_layers) == (48, 16)
    assert model.layer_types[:4] == ("linear_attention",) * 3 + ("full_attention",)
    dep = make_deployment(model, "trn2.3xlarge", 4, "fp8")
    assert dep.kv_bytes_per_token == 2 * 16 * 4 * 256 * 2  # 16 full-attention layers of 4 KV heads, BF16
    # softmax attention in the 16 full layers only; the delta rule of the other 48 charged per token
    assert dep.attention_flops_per_qk == 4.0 * 24 * 256 * 16
    always, _ = model.layer_params(dep.heads, dep.kv_heads)
    recurrence = 48 * 48 * 6 * 128 * 128
    assert dep.linear_flops_per_token == 2.0 * (always + model.lm_head_params()) + recurrence
    assert dep.state_bytes_per_sequence == 48 * (48 * 128 * 128 + (2 * 16 * 128 + 48 * 128) * 3) * 4


def test_a_qwen_shared_expert_width_counts_as_shared_experts_of_the_routed_width() -> None:
    moe = DENSE | {"num_experts": 64, "num_experts_per_tok": 4, "moe_intermediate_size": 512}
    assert from_hf_config("m", moe | {"shared_expert_intermediate_size": 1024}).shared_experts == 2
    assert (
        from_hf_config("m", moe | {"n_shared_experts": 1, "shared_expert_intermediate_size": 1024}).shared_experts == 1
    )
    assert from_hf_config("m", moe).shared_experts == 0
    with pytest.raises(ConfigurationError, match="not a whole number"):
        from_hf_config("m", moe | {"shared_expert_intermediate_size": 700})


def test_an_afmoe_config_reads_its_shared_experts_and_leading_dense_layers() -> None:
    # Arcee's AFMoE names DeepSeek's n_shared_experts and first_k_dense_replace num_shared_experts and
    # num_dense_layers; the shared expert is moe_intermediate_size wide (transformers' AfmoeMoE)
    afmoe = DENSE | {
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 256,
        "num_shared_experts": 1,
        "num_dense_layers": 2,
    }
    model = from_hf_config("m", afmoe)
    assert (model.shared_experts, model.moe_layers) == (1, 30)
    plain = from_hf_config("m", {k: v for k, v in afmoe.items() if k not in ("num_shared_experts", "num_dense_layers")})
    assert (plain.shared_experts, plain.moe_layers) == (0, 32)
    # two dense layers instead of routed ones (experts and router), and a shared expert in each of the 30 others
    shared_and_dense = 2 * 3 * 4096 * 14336 - 2 * (128 * 3 * 4096 * 256 + 4096 * 128) + 30 * 3 * 4096 * 256
    assert model.total_params() - plain.total_params() == shared_and_dense


def test_linear_attention_state_slots_are_reserved_out_of_the_kv_cache() -> None:
    hybrid = make_deployment(from_hf_config("m", HYBRID), "p5.48xlarge", 2)
    slots = hybrid.state_tokens(16)
    assert slots == math.ceil(16 * hybrid.state_bytes_per_sequence / hybrid.kv_bytes_per_token) > 0
    (replica,) = Cluster(hybrid, 1, config=EngineConfig(max_batch=16)).replicas
    assert replica.total_blocks == (hybrid.kv_capacity_tokens - slots) // 32
    dense = make_deployment(from_hf_config("m", DENSE), "p5.48xlarge", 2)
    assert dense.state_tokens(16) == 0
    (replica,) = Cluster(dense, 1, config=EngineConfig(max_batch=16)).replicas
    assert replica.total_blocks == dense.kv_capacity_tokens // 32
    # point mode: a batch of one whose KV fits but not beside its state is refused
    room = hybrid.kv_capacity_tokens - hybrid.state_tokens(1)
    model = hybrid.model
    simulate_point(model, "p5.48xlarge", 2, batch=1, input_len=room - 8, output_len=8)
    with pytest.raises(DoesNotFitError, match="at most batch 0 fits"):
        simulate_point(model, "p5.48xlarge", 2, batch=1, input_len=room - 7, output_len=8)
