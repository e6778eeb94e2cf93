from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import pytest

from switchyard.accelerator.errors import ConfigurationError, DoesNotFitError, UnknownNameError
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.hardware import Topology, get_chip, get_instance, list_chips, list_instances
from switchyard.accelerator.sim.models import get_model, list_models, load_model_config

REQUIRED_INSTANCES = [
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "inf2.xlarge",
    "inf2.8xlarge",
    "inf2.24xlarge",
    "inf2.48xlarge",
    "trn2.3xlarge",
    "trn2.48xlarge",
    "trn2u.48xlarge",
    "trn3-gen1-ultraserver",
    "trn3-gen2-ultraserver",
    "trn3.48xlarge",
    "trn3pd98.3xlarge",
    "p5.48xlarge",
    "p5en.48xlarge",
    "cs-3",
]
EXTRA_MODELS = [
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B",
    "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-4-Scout-17B-16E",
    "meta-llama/Llama-4-Maverick-17B-128E",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "deepseek-ai/DeepSeek-V3",
    "mistralai/Mixtral-8x7B-v0.1",
]


def test_every_benchmark_model_and_required_model_is_in_the_catalog(benchmarks_csv: Path) -> None:
    with benchmarks_csv.open() as fh:
        csv_models = {r["model"] for r in csv.DictReader(fh)}
    names = {m.name for m in list_models()}
    assert csv_models | set(EXTRA_MODELS) <= names


def test_required_instances_exist_with_sources() -> None:
    names = {i.name for i in list_instances()}
    assert set(REQUIRED_INSTANCES) <= names
    for inst in list_instances():
        assert inst.source
        assert inst.price_usd_per_hour is None or isinstance(inst.price_usd_per_hour, Decimal)
    for chip in list_chips():
        assert chip.source
        assert chip.bf16_flops > 0
        assert chip.hbm_bandwidth_bytes_per_s > 0
        assert chip.hbm_bytes > 0


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [  # published parameter counts (billions), from the model cards
        ("meta-llama/Llama-2-70b-hf", 69.0, None),
        ("meta-llama/Llama-3.1-405B", 405.0, None),
        ("mistralai/Mixtral-8x7B-v0.1", 46.7, 12.9),
        ("Qwen/Qwen3-235B-A22B", 235.0, 22.0),
        ("deepseek-ai/DeepSeek-V3", 671.0, 37.0),
        ("openai/gpt-oss-120b", 117.0, 5.1),
        ("meta-llama/Llama-4-Maverick-17B-128E", 400.0, 17.0),
        # models of the 2026 Neuron rows (cards, or the NxD Inference contrib README that ports them)
        ("mistralai/Mixtral-8x22B-Instruct-v0.1", 141.0, 39.0),
        ("mistralai/Mistral-Small-4-119B-2603", 119.0, None),
        ("mistralai/Ministral-3-14B-Instruct-2512", 13.5, None),  # language model of the 14B VLM
        ("mistralai/Ministral-3-3B-Instruct-2512-BF16", 3.4, None),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", 23.6, None),  # text decoder (contrib README)
        ("upstage/Solar-Open-100B", 102.6, 12.0),
        ("zai-org/GLM-4.7-Flash", 30.0, None),  # "30B-A3B": the 3B is a rounded name, 3.6B counted
        ("sarvamai/sarvam-30b", 32.0, None),  # contrib README: ~32B total
        ("moonshotai/Kimi-K2-Instruct-0905", 1000.0, 32.0),  # "1T total, 32B activated"
        # hybrid Gated DeltaNet text decoders of image-text-to-text checkpoints (card: language model 27B; the
        # vision encoder and the MTP layer are not counted)
        ("Qwen/Qwen3.5-27B", 27.0, None),
        ("Qwen/Qwen3.6-27B", 27.0, None),
        ("Qwen/Qwen3.6-35B-A3B", 35.0, 3.0),  # card: 35B in total, 3B activated
        ("Qwen/Qwen3.5-35B-A3B", 35.0, 3.0),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct", 480.0, 35.0),
        ("Qwen/Qwen3-Coder-Next", 80.0, None),  # "3B activated" is rounded: 3.56 B counted, embeddings included
        ("moonshotai/Kimi-K2.5", 1000.0, 32.0),  # text decoder: the card's 1T / 32B
        ("moonshotai/Kimi-K2.6", 1000.0, 32.0),
        ("sarvamai/sarvam-m", 24.0, None),
        ("Qwen/Qwen3.5-9B", 9.0, None),  # text decoder; the 2B and 4B cards' sizes count their vision encoders
        ("Qwen/Qwen2.5-VL-7B-Instruct", 7.61, None),  # text decoder: Qwen2.5-7B's card
        ("Qwen/Qwen2.5-VL-3B-Instruct", 3.09, None),  # text decoder: Qwen2.5-3B's card
        ("arcee-ai/Trinity-Nano-Preview", 6.0, 0.8),  # "800M non-embedding parameters active per token"
        ("arcee-ai/Trinity-Mini", 26.0, 3.0),
        ("arcee-ai/Trinity-Large-Preview", 398.0, 13.0),
        ("google/gemma-4-31B-it", 31.0, None),  # text decoder: 30.7 B
        ("google/gemma-4-26B-A4B-it", 26.0, 4.0),  # text decoder: 25.2 B / 3.8 B against the name's 26B / 4B
        # text decoder; its per-layer input table (2.35 B) is gathered, not multiplied: 2.28 B active, the README's 2.3B
        # effective ("E2B"), 4.63 B in all where the contrib README's 5.1B counts the vision and audio encoders too
        ("google/gemma-4-E2B", 4.63, 2.3),
        ("Qwen/Qwen3-1.7B", 1.7, None),  # the draft of the speculative pair: 1.4B without its (tied) embeddings
        # CCA attention as GQA, its convolutions and MLP router not counted (~0.04 B): 8.80 B
        ("Zyphra/ZAYA1-base", 8.84, None),  # the NxD Inference contrib README's 8.84B
        ("Zyphra/ZAYA1-8B", 8.4, None),  # the card's 8.4B; the same architecture
    ],
)
def test_parameter_counts_match_model_cards(name: str, total_b: float, active_b: float | None) -> None:
    m = get_model(name)
    assert m.total_params() / 1e9 == pytest.approx(total_b, rel=0.05)
    if active_b is not None:
        assert m.active_params() / 1e9 == pytest.approx(active_b, rel=0.1)


def test_unknown_names_list_close_matches() -> None:
    with pytest.raises(UnknownNameError) as exc:
        get_model("meta-llama/Llama-2-70b")
    assert "meta-llama/Llama-2-70b-hf" in str(exc.value)
    with pytest.raises(UnknownNameError, match=r"trn2\.48xlarge"):
        get_instance("trn2.48xl")
    with pytest.raises(UnknownNameError, match="Trainium2"):
        get_chip("trainium-2")


def test_trainium3_instance_types_are_in_the_catalog_as_aws_names_them() -> None:
    big, small = get_instance("trn3.48xlarge"), get_instance("trn3pd98.3xlarge")
    assert (big.chip.name, big.chips, big.topology) == ("Trainium3", 16, Topology.SWITCHED)
    assert (small.chip.name, small.chips, small.max_tp) == ("Trainium3", 1, 4)  # one chip, 4 ranks at LNC=2
    assert big.max_tp == 64  # the NxDI Trn3 tutorial's 8 copies of TP=8 per instance
    assert big.calibration_group == small.calibration_group == get_instance("trn3-gen1-ultraserver").calibration_group
    # AWS publishes no price and no instance sizes for Trn3: the price is null and the inferred fields say so
    assert (big.price_usd_per_hour, small.price_usd_per_hour) == (None, None)
    assert {"chips", "network_gbps"} <= set(big.estimates)
    assert "trn3-arch.rst" in big.source
    assert "neuron_dhal_v4.c" in small.source


def test_topologies_and_lnc() -> None:
    assert get_instance("trn2u.48xlarge").topology is Topology.TORUS3D
    assert get_instance("trn3-gen2-ultraserver").topology is Topology.SWITCHED
    assert get_instance("trn1.32xlarge").max_tp == 32  # TP counts physical NeuronCores
    assert get_instance("trn2.48xlarge").max_tp == 64  # LNC=2: 4 logical cores per chip
    assert get_instance("trn2.48xlarge").chips_for_tp(64) == 16


def test_load_model_config_registers_a_hugging_face_config(tmp_path: Path) -> None:
    cfg = {
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 4096,
        "vocab_size": 1000,
    }
    folder = tmp_path / "tiny-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    model = load_model_config(folder / "config.json", name="acme/tiny")
    assert get_model("acme/tiny") is model
    assert model.head_dim == 64
    assert model.kv_elements_per_token() == 2 * 4 * 4 * 64
    (folder / "bad.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ConfigurationError, match="num_hidden_layers"):
        load_model_config(folder / "bad.json")


def test_a100_instances_carry_their_gpus_and_the_gpu_calibration() -> None:
    for name, chip, hbm_gib, bandwidth in (
        ("p4d.24xlarge", "A100-40GB", 40, 1.555e12),
        ("p4de.24xlarge", "A100-80GB", 80, 2.039e12),
    ):
        inst = get_instance(name)
        assert inst.chip is get_chip(chip)
        assert (inst.chips, inst.topology, inst.max_tp) == (8, Topology.SWITCHED, 8)
        assert inst.calibration_group == "gpu"
        assert inst.price_usd_per_hour is not None
        assert inst.chip.hbm_bytes == hbm_gib * 2**30
        assert inst.chip.hbm_bandwidth_bytes_per_s == bandwidth
        assert inst.chip.bf16_flops == 312e12
        assert not inst.chip.static_shapes
    # Vidur's deployment: Llama-2-70B at TP2 needs the 80 GB parts
    assert make_deployment("meta-llama/Llama-2-70b-hf", "p4de.24xlarge", 2).kv_capacity_tokens > 16_000
    with pytest.raises(DoesNotFitError, match="tp >= 4"):
        make_deployment("meta-llama/Llama-2-70b-hf", "p4d.24xlarge", 2)


def test_the_small_qwen3_5_decoders_have_their_trainium_ports_layers_and_state_buffers() -> None:
    # NxD Inference contrib READMEs: 4B and 9B are [3 DeltaNet + 1 GQA] x 8 with a recurrent_state_buffer of
    # [batch, 32, 128, 128] and a conv_state_buffer of [batch, 8192, 3] per DeltaNet layer; 4B ties its embeddings,
    # 9B does not; 2B is [3 DeltaNet + 1 GQA] x 6 with 16 key and 16 value heads of 128 and tied embeddings
    for name, tied in (("Qwen/Qwen3.5-4B", True), ("Qwen/Qwen3.5-9B", False)):
        model = get_model(name)
        assert (model.linear_attention_layers, model.attention_layers, model.tie_word_embeddings) == (24, 8, tied)
        assert model.linear_attention_state_elements() == 24 * (32 * 128 * 128 + 8192 * 3)
    small = get_model("Qwen/Qwen3.5-2B")
    assert (small.linear_attention_layers, small.attention_layers, small.tie_word_embeddings) == (18, 6, True)
    assert small.linear_attention_state_elements() == 18 * (16 * 128 * 128 + (2 * 16 * 128 + 16 * 128) * 3)
    assert small.kv_elements_per_token() == 2 * 6 * 2 * 256


# Ids of the 2026 Neuron collection the catalog does not resolve, and why (docs/simulator.md, Catalogs).
NOT_IN_CATALOG_2026 = {
    # attention the format cannot express: MiniMax-M3's sparse attention (a lightning indexer choosing key blocks for
    # GQA, in layers not sourced), DeepSeek-V4's compressed latent attention
    "MiniMaxAI/MiniMax-M3 (text backbone)", "DeepSeek-V4-Flash (HF id not stated)",
    # heads per layer type, which the format carries, but fields not sourced (MiMo-V2.5's configs)
    "XiaomiMiMo/MiMo-V2.5", "XiaomiMiMo/MiMo-V2.5-Pro",
    # sourced, but its rows would take trn2.48xlarge's TPOT p90 past the group's limit (docs/simulator.md)
    "XiaomiMiMo/MiMo-V2-Flash",
    # vision-language models whose published rows are not text-only, or whose text decoder was not sourced
    "OpenGVLab/InternVL3-8B-Instruct", "PerceptronAI/Isaac-0.2-2B-Preview", "datalab-to/chandra",
    "HuggingFaceVLA/smolvla_libero",
}  # fmt: skip


def test_the_2026_neuron_ids_resolve_but_the_documented_exceptions() -> None:
    data = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "neuron_2026"
    ids = set()
    for name in ("neuron_benchmarks_2026.csv", "neuron_benchmarks_unpinned_2026.csv"):
        with (data / name).open(newline="", encoding="utf-8") as fh:
            ids |= {row["model"] for row in csv.DictReader(fh)}
    unresolved = set()
    for model_id in ids:
        try:
            get_model(model_id)
        except UnknownNameError:
            unresolved.add(model_id)
    assert unresolved == NOT_IN_CATALOG_2026
    assert len(ids - unresolved) == 51
