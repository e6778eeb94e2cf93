"""Gates on the attention output (one per output channel, or one per head), query heads given per layer
(`num_attention_heads_per_layer`) and MLP types per layer (`mlp_layer_types`): what each costs in parameters and
FLOPs, the configs the format refuses, and Laguna-XS.2, the catalog model that has all three."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.hf_config import from_hf_config
from switchyard.accelerator.sim.model_config import GATE_FULL, GATE_PER_HEAD, ModelConfig
from switchyard.accelerator.sim.models import get_model
from tests.accelerator.hf_configs import DENSE, SLIDING, step_s

D, LAYERS, HEADS, HEAD_DIM = DENSE["hidden_size"], DENSE["num_hidden_layers"], 32, 128
PER_HEAD = DENSE | {"gating": True}  # Laguna's field: one softplus gate per head
FULL = DENSE | {"attn_output_gate": True}  # Qwen3-Next's / AFMoE's: one gate per output channel
# SLIDING's layers (sliding-window and full attention in turn) with 48 query heads in the sliding ones
PER_LAYER_HEADS = SLIDING | {"num_attention_heads_per_layer": [48, 32] * 16}


def test_a_per_head_gate_is_a_hidden_by_heads_projection_in_every_layer() -> None:
    base, per_head, full = (from_hf_config("m", c) for c in (DENSE, PER_HEAD, FULL))
    assert (per_head.attn_output_gate, per_head.attn_output_gate_width) == (True, GATE_PER_HEAD)
    assert full.attn_output_gate_width == GATE_FULL
    assert per_head.total_params() - base.total_params() == LAYERS * D * HEADS
    assert per_head.active_params() - base.active_params() == LAYERS * D * HEADS
    assert full.total_params() - base.total_params() == LAYERS * D * HEADS * HEAD_DIM
    assert per_head.attention_params() - base.attention_params() == D * HEADS
    # the gate changes neither what is cached nor the attention's own work
    assert per_head.kv_elements_per_token() == base.kv_elements_per_token()
    assert per_head.attention_flops_per_qk() == base.attention_flops_per_qk()


@pytest.mark.parametrize(("instance", "tp", "heads"), [("trn2.48xlarge", 8, 32), ("trn2.48xlarge", 64, 24)])
def test_a_per_head_gate_costs_its_matmul_on_the_deployments_padded_heads(instance: str, tp: int, heads: int) -> None:
    cfg = DENSE | {"num_attention_heads": heads, "head_dim": HEAD_DIM}
    base = make_deployment(from_hf_config("m", cfg), instance, tp)
    gated = make_deployment(from_hf_config("m", cfg | {"gating": "per-head"}), instance, tp)
    padded_heads = dict(gated.padded_heads)["full_attention"][0]
    assert padded_heads >= heads
    assert gated.linear_flops_per_token - base.linear_flops_per_token == 2 * LAYERS * D * padded_heads
    assert gated.always_weight_bytes - base.always_weight_bytes == 2 * LAYERS * D * padded_heads  # BF16


def test_a_decode_step_costs_more_with_a_wider_gate() -> None:
    contexts = [2048] * 8
    none, per_head, full = (step_s(c, contexts, "trn2.48xlarge", 8) for c in (DENSE, PER_HEAD, FULL))
    assert none < per_head < full


def test_query_heads_per_layer_become_the_heads_of_each_layer_type() -> None:
    per_layer = from_hf_config("m", PER_LAYER_HEADS)
    as_swa_field = from_hf_config("m", SLIDING | {"swa_num_attention_heads": 48})
    assert {s.kind: s.heads for s in per_layer.attention_shapes()} == {"full_attention": 32, "sliding_attention": 48}
    assert per_layer.total_params() == as_swa_field.total_params()
    assert per_layer.attention_flops_per_qk() == as_swa_field.attention_flops_per_qk()
    # heads given per layer for full attention alone set the model's own
    assert from_hf_config("m", DENSE | {"num_attention_heads_per_layer": [16] * LAYERS}).num_heads == 16
    # gates follow each type's heads
    gated = from_hf_config("m", PER_LAYER_HEADS | {"gating": True})
    assert gated.total_params() - per_layer.total_params() == 16 * D * 48 + 16 * D * 32


def test_mlp_layer_types_give_the_moe_layers() -> None:
    moe = DENSE | {"num_experts": 64, "num_experts_per_tok": 4, "moe_intermediate_size": 512}
    assert from_hf_config("m", moe).moe_layers == LAYERS
    laid_out = from_hf_config("m", moe | {"mlp_layer_types": ["dense"] * 2 + ["sparse"] * (LAYERS - 2)})
    assert laid_out.moe_layers == LAYERS - 2
    # the two dense layers' MLPs replace two layers' experts
    every = from_hf_config("m", moe)
    assert laid_out.total_params() - every.total_params() == 2 * (
        laid_out.dense_mlp_params() - 64 * every.expert_params() - D * 64
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_attention_heads_per_layer": [32] * (LAYERS - 1)}, "for each of its 32 layers"),
        ({"num_attention_heads_per_layer": [32] * (LAYERS - 1) + [0]}, "positive count"),
        ({"num_attention_heads_per_layer": [32] * (LAYERS - 1) + [40]}, "differs between full_attention layers"),
        ({"num_attention_heads_per_layer": [36] * LAYERS}, "not a multiple of its 8 KV heads"),
        ({"num_attention_heads_per_layer": [32] * LAYERS, "kv_lora_rank": 512}, "latent attention"),
        ({"gating": "per-channel"}, "gating must be"),
        ({"gating": True, "gating_types": ["per_element"] * LAYERS}, "different widths"),
        ({"gating_types": ["per_head"] * (LAYERS - 1) + [["per_head"]]}, "gating must be"),
        ({"gating": True, "attn_output_gate": True}, "both attn_output_gate and gating"),
        ({"mlp_layer_types": ["dense"] * (LAYERS - 1)}, "mlp_layer_types must give"),
        ({"mlp_layer_types": ["dense"] * (LAYERS - 1) + ["moe"]}, "mlp_layer_types must give"),
        ({"mlp_layer_types": ["dense"] + ["sparse"] * (LAYERS - 1)}, "has no experts"),
    ],
)
def test_gates_heads_and_mlp_layouts_that_cannot_be_modelled_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        from_hf_config("m", DENSE | fields)


def test_heads_per_layer_that_differ_within_the_sliding_layers_or_from_swa_heads_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="differs between sliding_attention layers"):
        from_hf_config("m", SLIDING | {"num_attention_heads_per_layer": [48, 32] * 15 + [64, 32]})
    with pytest.raises(ConfigurationError, match="disagree"):
        from_hf_config("m", PER_LAYER_HEADS | {"swa_num_attention_heads": 64})


def test_a_gate_of_an_unknown_width_is_refused_by_the_model_format() -> None:
    with pytest.raises(ConfigurationError, match="attn_output_gate_width"):
        ModelConfig("m", D, LAYERS, HEADS, 8, HEAD_DIM, 14336, 128256, 131072, attn_output_gate_width="per_channel")


def test_laguna_xs_2_has_its_configs_heads_gates_and_experts() -> None:
    m = get_model("poolside/Laguna-XS.2")
    shapes = {s.kind: (s.layers, s.heads, s.kv_heads, s.gate_width) for s in m.attention_shapes()}
    assert shapes == {"full_attention": (10, 48, 8, 1), "sliding_attention": (30, 64, 8, 1)}
    assert (m.sliding_window, m.moe_layers, m.num_experts, m.experts_per_token, m.shared_experts) == (
        512,
        39,
        256,
        8,
        1,
    )
    assert m.kv_elements_per_token() == 40 * 2 * 8 * 128
    assert m.window_kv_elements_per_token() == 30 * 2 * 8 * 128
    # the card's 33B total, 3B activated
    assert round(m.total_params() / 1e9, 2) == 33.44
    assert round(m.active_params() / 1e9, 2) == 2.81
    # its per-head gates are 5 M parameters; gates as wide as the attention output would be 0.6 B more
    gates = 2048 * (10 * 48 + 30 * 64)
    assert replace(m, attn_output_gate=False).total_params() == m.total_params() - gates
    full = replace(m, attn_output_gate_width=GATE_FULL)
    assert full.total_params() - m.total_params() == gates * 127
