"""DeepSeek sparse attention (GLM-5's glm_moe_dsa): the latent attention runs over the indexer's top-k keys, the
indexer scores every key, and every token's latent KV and indexer key stay cached."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.hf_config import from_hf_config
from switchyard.accelerator.sim.model_config import ModelConfig
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.stepcost import StepCost

MLA: dict[str, Any] = {
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "intermediate_size": 8192,
    "vocab_size": 32000,
    "max_position_embeddings": 65536,
    "q_lora_rank": 512,
    "kv_lora_rank": 256,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
DSA: dict[str, Any] = MLA | {"index_topk": 2048, "index_n_heads": 8, "index_head_dim": 128}


def _step_s(model: ModelConfig, contexts: list[int], instance: str, tp: int) -> float:
    dep = make_deployment(model, instance, tp)
    _, coeffs = coefficients_for(dep.instance)
    return StepCost(dep, coeffs).iteration_s(0, 0.0, 0.0, contexts)


def test_the_indexer_adds_its_projections_its_key_and_its_scores_to_latent_attention() -> None:
    mla, dsa = from_hf_config("m", MLA), from_hf_config("m", DSA)
    indexer = 512 * 8 * 128 + 2048 * 128 + 2048 * 8  # wq_b from the query latent, wk, weights_proj
    assert dsa.indexer_params() == indexer
    assert dsa.total_params() - mla.total_params() == 16 * indexer
    assert dsa.kv_elements_per_token() == 16 * (256 + 64 + 128)  # latent, rope key and the indexer's key
    assert dsa.window_kv_elements_per_token() == mla.kv_elements_per_token() == 16 * (256 + 64)
    assert dsa.attention_flops_per_qk(window_only=True) == mla.attention_flops_per_qk() == 4 * 16 * 128 * 16
    assert dsa.attention_flops_per_qk() == mla.attention_flops_per_qk() + 16 * 2 * 8 * 128
    assert (dsa.sparse_attention_window, mla.sparse_attention_window) == (2048, 0)


@pytest.mark.parametrize(("instance", "tp"), [("p5.48xlarge", 2), ("trn2.48xlarge", 8)])
def test_past_its_top_k_a_decode_grows_by_the_indexer_alone(instance: str, tp: int) -> None:
    dsa = from_hf_config("m", DSA)
    # the indexer's part alone: a model whose latent attention and latent KV cost nothing
    indexer_only = replace(dsa, name="indexer", head_dim=0, kv_lora_rank=1, rope_head_dim=0)
    mla = from_hf_config("m", MLA)
    dsa_growth = _step_s(dsa, [16384], instance, tp) - _step_s(dsa, [8192], instance, tp)
    mla_growth = _step_s(mla, [16384], instance, tp) - _step_s(mla, [8192], instance, tp)
    assert 0 < dsa_growth < mla_growth / 2
    indexer_growth = _step_s(indexer_only, [16384], instance, tp) - _step_s(indexer_only, [8192], instance, tp)
    assert dsa_growth == pytest.approx(indexer_growth, rel=0.05)
    # within its top-k every key is attended: the indexer's cost comes on top of dense latent attention
    assert _step_s(dsa, [1024], instance, tp) > _step_s(mla, [1024], instance, tp)


def test_an_indexer_without_its_fields_or_latent_attention_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="sparse-attention indexer"):
        from_hf_config("m", DSA | {"index_head_dim": None})
    dense = {k: v for k, v in DSA.items() if k not in ("q_lora_rank", "kv_lora_rank")}
    with pytest.raises(ConfigurationError, match="sparse-attention indexer"):
        from_hf_config("m", dense)


def test_glm_5_fp8_is_glm_5_with_an_indexer_in_every_layer() -> None:
    model = get_model("zai-org/GLM-5-FP8")
    assert (model.num_layers, model.moe_layers, model.num_experts, model.shared_experts) == (78, 75, 256, 1)
    assert (model.index_topk, model.index_n_heads, model.index_head_dim) == (2048, 32, 128)
    assert model.kv_elements_per_token() == 78 * (512 + 64 + 128)
    assert model.total_params() / 1e9 == pytest.approx(744.0, rel=0.01)  # "744B parameters (40B active)"
    assert model.active_params() / 1e9 == pytest.approx(40.0, rel=0.05)
    dep = make_deployment(model, "trn2.48xlarge", 64, "fp8")
    assert dep.window_tokens == 2048


def test_shared_indexer_layers_reuse_a_top_k_and_cache_no_indexer_key() -> None:
    types = ["full", "shared", "shared", "shared"] * 4
    shared = from_hf_config("m", DSA | {"indexer_types": types})
    every = from_hf_config("m", DSA)
    assert (shared.indexer_layers, every.indexer_layers) == (4, 16)
    assert shared.kv_elements_per_token() == 16 * (256 + 64) + 4 * 128
    assert every.total_params() - shared.total_params() == 12 * every.indexer_params()
    assert shared.attention_flops_per_qk(window_only=True) == every.attention_flops_per_qk(window_only=True)
    assert shared.attention_flops_per_qk() == every.attention_flops_per_qk() - 12 * 2 * 8 * 128
    grow = [_step_s(m, [16384], "p5.48xlarge", 2) - _step_s(m, [8192], "p5.48xlarge", 2) for m in (shared, every)]
    assert 0 < grow[0] < grow[1]
    with pytest.raises(ConfigurationError, match="indexer_types"):
        from_hf_config("m", DSA | {"indexer_types": ["shared", *types[1:]]})


def test_glm_5_2_runs_its_indexer_in_21_of_78_layers() -> None:
    model = get_model("zai-org/GLM-5.2-FP8")
    assert model.indexer_layers == 21
    assert model.kv_elements_per_token() == 78 * (512 + 64) + 21 * 128
    assert model.total_params() / 1e9 == pytest.approx(744.0, rel=0.01)  # ~753B with its MTP layer
    assert model.active_params() / 1e9 == pytest.approx(40.0, rel=0.05)
