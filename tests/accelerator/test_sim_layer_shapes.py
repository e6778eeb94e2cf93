"""Attention layer types with heads of their own (Gemma 4's global layers, MiMo's sliding-window ones): parameters,
KV cache and attention FLOPs are counted per layer type, a deployment pads each type's heads as its own, and the
step cost follows the layer type whose heads grow: past the window only the full-attention layers' do."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.hf_config import from_hf_config
from tests.accelerator.hf_configs import SLIDING, step_s

# SLIDING: 32 layers alternating sliding-window (1,024 tokens) and full attention, 32 query heads, 8 KV heads of 128
D = SLIDING["hidden_size"]
# Gemma 4's shape: global (full-attention) layers with a head width and KV heads of their own, one tensor as K and V
GEMMA_LIKE = SLIDING | {"global_head_dim": 256, "num_global_key_value_heads": 2, "attention_k_eq_v": True}
# MiMo's shape: keys 192 wide, values 128, and the sliding-window layers with twice the full layers' KV heads
MIMO_LIKE = SLIDING | {
    "head_dim": 192,
    "v_head_dim": 128,
    "num_key_value_heads": 4,
    "swa_num_key_value_heads": 8,
    "swa_head_dim": 192,
    "swa_v_head_dim": 128,
}


def test_global_layers_with_their_own_heads_count_their_kv_parameters_and_flops() -> None:
    gemma, base = from_hf_config("m", GEMMA_LIKE), from_hf_config("m", SLIDING)
    # a full layer caches one 256-wide tensor per KV head (K is V), a sliding layer K and V of 128 for each of 8
    assert gemma.kv_elements_per_token() == 16 * 2 * 256 + 16 * 2 * 8 * 128
    assert gemma.window_kv_elements_per_token() == base.window_kv_elements_per_token() == 16 * 2 * 8 * 128
    # a full layer: q and o of 32 heads x 256 and one K(=V) projection of 2 heads x 256, no v_proj
    full_layer, base_layer = 2 * D * 32 * 256 + D * 2 * 256, 2 * D * 32 * 128 + 2 * D * 8 * 128
    assert gemma.total_params() - base.total_params() == 16 * (full_layer - base_layer)
    assert gemma.attention_flops_per_qk() == 16 * 2 * 32 * (256 + 256) + 16 * 2 * 32 * (128 + 128)
    assert gemma.attention_flops_per_qk(window_only=True) == base.attention_flops_per_qk(window_only=True)


def test_sliding_layers_with_their_own_kv_heads_and_narrower_values() -> None:
    mimo = from_hf_config("m", MIMO_LIKE)
    assert mimo.kv_elements_per_token() == 16 * 4 * (192 + 128) + 16 * 8 * (192 + 128)
    assert mimo.window_kv_elements_per_token() == 16 * 8 * (192 + 128)
    full_layer = D * 32 * 192 + 32 * 128 * D + D * 4 * (192 + 128)
    sliding_layer = D * 32 * 192 + 32 * 128 * D + D * 8 * (192 + 128)
    assert mimo.softmax_attention_params() == 16 * (full_layer + sliding_layer)
    assert mimo.attention_flops_per_qk() == 32 * 2 * 32 * (192 + 128)


def test_a_gemma_4_moe_block_counts_its_dense_mlp_as_a_shared_expert() -> None:
    # Gemma 4 (26B-A4B) runs the layer's dense MLP (intermediate_size) beside its routed experts (top_k_experts)
    moe = GEMMA_LIKE | {"enable_moe_block": True, "num_experts": 16, "top_k_experts": 4, "moe_intermediate_size": 512}
    model = from_hf_config("m", moe | {"intermediate_size": 1536})
    assert (model.num_experts, model.experts_per_token, model.shared_experts, model.moe_layers) == (16, 4, 3, 32)
    assert from_hf_config("m", moe | {"intermediate_size": 1024}).shared_experts == 2


def test_a_deployment_pads_each_layer_types_heads_as_its_own() -> None:
    # trn2 at TP4: the sliding layers' 8 KV heads shard 2 a rank; the global layers' 2 are replicated to 4
    dep = make_deployment(from_hf_config("m", GEMMA_LIKE), "trn2.48xlarge", 4)
    assert dict(dep.padded_heads) == {"full_attention": (32, 4), "sliding_attention": (32, 8)}
    assert dep.kv_bytes_per_token == (16 * 4 * 256 + 16 * 2 * 8 * 128) * 2
    assert dep.window_kv_bytes_per_token == 16 * 2 * 8 * 128 * 2
    assert dep.attention_flops_per_qk == 16 * 2 * 32 * 512 + 16 * 2 * 32 * 256


@pytest.mark.parametrize(("instance", "tp"), [("trn2.48xlarge", 4), ("p5.48xlarge", 2)])  # KV heads not replicated
def test_decode_cost_past_the_window_follows_the_full_layers_heads_only(instance: str, tp: int) -> None:
    def growth(cfg: dict[str, Any]) -> float:
        return step_s(cfg, [8192], instance, tp) - step_s(cfg, [4096], instance, tp)

    # more KV heads in the sliding layers: dearer within the window, the same growth past it
    same_kv = MIMO_LIKE | {"swa_num_key_value_heads": 4}
    assert step_s(MIMO_LIKE, [1000], instance, tp) > step_s(same_kv, [1000], instance, tp)
    assert growth(MIMO_LIKE) == pytest.approx(growth(same_kv), rel=1e-9)
    # more KV heads in the full layers: every token of the context costs more
    wide_full = SLIDING | {"num_global_key_value_heads": 16}
    assert growth(wide_full) > growth(SLIDING) > 0
