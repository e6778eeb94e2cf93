"""Layers that share an earlier layer's KV cache (Gemma 3n/4's num_kv_shared_layers), MLP widths per layer and
per-layer input embeddings (PLE): what each costs in parameters, KV memory, bytes read and FLOPs, and Gemma 4 E2B,
the catalog model that has all three."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.costmodel import bucket, forward_time_s, windowed
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.hf_config import from_hf_config
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.stepcost import StepCost
from tests.accelerator.hf_configs import DENSE, SLIDING, step_s

D = SLIDING["hidden_size"]
# SLIDING's 32 layers (sliding-window and full attention in turn), the last 8 attending over the KV cache of the last
# earlier layer of their type: 4 of each type share
SHARED = SLIDING | {"num_kv_shared_layers": 8}
SLIDING_KV, FULL_KV = 2 * 8 * 128, 2 * 8 * 128  # K and V of 8 heads of 128 per layer and token, either type
PLE = SHARED | {"hidden_size_per_layer_input": 256, "vocab_size_per_layer_input": 32000}


def test_layers_sharing_a_kv_cache_store_no_kv_and_have_no_kv_projections_but_attend() -> None:
    shared, base = from_hf_config("m", SHARED), from_hf_config("m", SLIDING)
    assert {s.kind: s.shared_kv_layers for s in shared.attention_shapes()} == {
        "full_attention": 4,
        "sliding_attention": 4,
    }
    assert shared.kv_elements_per_token() == 12 * FULL_KV + 12 * SLIDING_KV  # 24 of 32 layers cache their own
    # every layer still reads the cache it attends over, and computes its attention
    assert shared.kv_read_elements_per_token() == base.kv_read_elements_per_token() == base.kv_elements_per_token()
    assert shared.window_kv_elements_per_token() == base.window_kv_elements_per_token()
    assert shared.attention_flops_per_qk() == base.attention_flops_per_qk()
    assert base.total_params() - shared.total_params() == 8 * D * 8 * 128 * 2  # 8 layers' k and v projections


@pytest.mark.parametrize("instance", ["trn2.48xlarge", "p5.48xlarge"])
def test_a_deployment_holds_more_tokens_with_shared_kv_but_reads_and_attends_as_without(instance: str) -> None:
    shared, base = (
        make_deployment(from_hf_config("m", SHARED), instance, 8),
        make_deployment(from_hf_config("m", SLIDING), instance, 8),
    )
    assert shared.kv_bytes_per_token == 24 / 32 * base.kv_bytes_per_token
    assert shared.kv_read_bytes_per_token == base.kv_read_bytes_per_token == base.kv_bytes_per_token
    assert shared.kv_capacity_tokens > base.kv_capacity_tokens * 32 / 24
    # what a longer context adds to a decode step (attention and KV read) is the same with and without sharing
    short, long = [600] * 4, [6000] * 4
    grows_shared = step_s(SHARED, long, instance, 8) - step_s(SHARED, short, instance, 8)
    grows_base = step_s(SLIDING, long, instance, 8) - step_s(SLIDING, short, instance, 8)
    assert grows_shared == pytest.approx(grows_base, rel=1e-9)
    assert step_s(SHARED, short, instance, 8) < step_s(SLIDING, short, instance, 8)  # fewer weights to read


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_kv_shared_layers": 32}, "leaves none"),
        # the two shared layers are full attention, and no earlier layer is: no cache of their type to share
        ({"num_kv_shared_layers": 2, "layer_types": ["sliding_attention"] * 30 + ["full_attention"] * 2}, "earlier"),
        ({"num_kv_shared_layers": 4, "kv_lora_rank": 512, "layer_types": None}, "latent attention"),
    ],
)
def test_kv_sharing_that_cannot_be_modelled_is_refused(fields: dict[str, Any], message: str) -> None:
    cfg = {k: v for k, v in (SLIDING | fields).items() if v is not None}
    with pytest.raises(ConfigurationError, match=message):
        from_hf_config("m", cfg)


def test_kv_sharing_over_linear_attention_layers_is_refused() -> None:
    hybrid = DENSE | {
        "layer_types": ["linear_attention", "full_attention"] * 16,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "num_kv_shared_layers": 4,
    }
    with pytest.raises(ConfigurationError, match="linear_attention"):
        from_hf_config("m", hybrid)


def test_a_double_wide_mlp_doubles_the_kv_shared_layers_mlps_only() -> None:
    wide = from_hf_config("m", SHARED | {"use_double_wide_mlp": True})
    shared = from_hf_config("m", SHARED)
    assert wide.mlp_widths == (14336,) * 24 + (28672,) * 8
    assert wide.total_params() - shared.total_params() == 8 * 3 * D * 14336
    assert wide.active_params() - shared.active_params() == 8 * 3 * D * 14336
    # without KV sharing there is no layer to widen (Hugging Face's Gemma 4 widens the KV-shared layers only)
    assert from_hf_config("m", SLIDING | {"use_double_wide_mlp": True}).mlp_widths == ()


def test_mlp_widths_may_be_listed_per_layer_but_not_beside_experts() -> None:
    listed = from_hf_config("m", DENSE | {"intermediate_size": [8192] * 16 + [16384] * 16})
    assert listed.intermediate_size == 8192
    assert listed.dense_mlps_params() == 16 * 3 * D * 8192 + 16 * 3 * D * 16384
    assert from_hf_config("m", DENSE | {"intermediate_size": [8192] * 32}).mlp_widths == ()  # one width: plain
    with pytest.raises(ConfigurationError, match="one width for each"):
        from_hf_config("m", DENSE | {"intermediate_size": [8192] * 31})
    with pytest.raises(ConfigurationError, match="mixture-of-experts"):
        from_hf_config("m", DENSE | {"intermediate_size": [8192] * 16 + [16384] * 16, "num_local_experts": 8})


def test_per_layer_input_embeddings_are_a_resident_table_and_small_matmuls() -> None:
    ple, plain = from_hf_config("m", PLE), from_hf_config("m", SHARED)
    projections, table = ple.per_layer_input_params()
    assert table == 32000 * 32 * 256
    assert projections == D * 32 * 256 + 32 * 2 * D * 256  # to every layer's input, then each layer's gate and back
    assert ple.total_params() - plain.total_params() == projections + table
    assert ple.active_params() - plain.active_params() == projections  # the table is gathered, not multiplied
    dep, dep_plain = make_deployment(ple, "trn2.48xlarge", 8), make_deployment(plain, "trn2.48xlarge", 8)
    assert dep.weight_bytes - dep_plain.weight_bytes == 2 * (projections + table)  # BF16, all resident
    assert dep.always_weight_bytes - dep_plain.always_weight_bytes == 2 * projections  # read every pass
    assert dep.gathered_bytes_per_token == 2 * 32 * 256  # a token's row: every layer's input
    assert dep_plain.gathered_bytes_per_token == 0


@pytest.mark.parametrize("instance", ["trn2.48xlarge", "p5.48xlarge"])
def test_engine_step_cost_matches_the_vectorised_cost_model_with_shared_kv_and_per_layer_inputs(instance: str) -> None:
    dep = make_deployment(from_hf_config("m", PLE | {"use_double_wide_mlp": True}), instance, 8)
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
    n, cached = 2000, 3000
    pt = float(bucket(n)[()]) if static else float(n)
    qk, wqk = float(n * (cached + n)), float(n * min(cached + n, 1024))
    expected = forward_time_s(dep, coeffs.prefill, pt, qk, cached, 1, window_qk=wqk, window_kv=1024, sequences=1)
    assert cost.iteration_s(n, qk, cached, [], 1, wqk, 1024.0) == pytest.approx(float(expected), rel=1e-12)
    # the gathered rows are charged per computed token: a prefill pays them for every prompt token
    no_gather = StepCost(replace(dep, gathered_bytes_per_token=0.0), coeffs)
    extra = cost.iteration_s(n, qk, cached, [], 1) - no_gather.iteration_s(n, qk, cached, [], 1)
    per_byte = coeffs.prefill.inv_mbu / dep.hbm_bandwidth_bytes_per_s
    assert extra == pytest.approx(pt * dep.gathered_bytes_per_token * per_byte, rel=1e-9)


def test_gemma_4_e2b_shares_its_last_20_layers_kv_and_widens_their_mlps() -> None:
    m = get_model("google/gemma-4-E2B")
    full, sliding = m.attention_shapes()
    # 35 layers, a full-attention layer (1 KV head of 512) every fifth, the others a 512-token window (1 of 256)
    assert (full.layers, full.shared_kv_layers, full.kv_heads, full.qk_dim) == (7, 4, 1, 512)
    assert (sliding.layers, sliding.shared_kv_layers, sliding.kv_heads, sliding.qk_dim) == (28, 16, 1, 256)
    assert m.kv_elements_per_token() == 3 * 2 * 512 + 12 * 2 * 256  # layers 0-14 cache, 15-34 reuse theirs
    assert m.kv_read_elements_per_token() == 7 * 2 * 512 + 28 * 2 * 256
    assert m.mlp_widths == (6144,) * 15 + (12288,) * 20  # the contrib README's per-layer MLP
    _, table = m.per_layer_input_params()
    assert table == 262144 * 8960  # the README's PLE table [262144, 8960]
    # the README: 2.3B effective (the total less the per-layer table); its 5.1B also counts vision and audio
    assert (m.total_params() - table) / 1e9 == pytest.approx(2.3, rel=0.02)
    assert m.total_params() / 1e9 == pytest.approx(4.63, rel=0.01)
