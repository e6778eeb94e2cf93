"""Published model ids, Hugging Face configs of any other model, and TP above the head count."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.errors import UnknownNameError
from switchyard.accelerator.pool import AcceleratorPool, parse_fleet
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.models import get_model, model_aliases
from switchyard.accelerator.sim.point import simulate_point

from .conftest import DATA

ISSUE_IDS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-405B-Instruct",
    "deepseek-ai/DeepSeek-V3-0324",
    "Qwen/Qwen3-235B-A22B-Instruct-2507",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
]


def _published_ids() -> list[str]:
    ids: set[str] = set()
    for table in sorted(DATA.glob("*.csv")):
        with table.open(newline="", encoding="utf-8") as fh:
            ids |= {row["model"] for row in csv.DictReader(fh)}
    return sorted(ids)


def test_the_tables_name_the_models_we_check() -> None:
    ids = _published_ids()
    assert len(ids) >= 10  # the three tables are there and name their models
    assert "meta-llama/Llama-4-Scout-17B-16E-Instruct" in ids


@pytest.mark.parametrize("model_id", sorted(set(_published_ids()) | set(ISSUE_IDS)))
def test_every_published_id_resolves_under_its_own_name(model_id: str) -> None:
    model = get_model(model_id)
    assert model.name == model_id
    assert model.source
    assert model.total_params() > 0


def test_aliases_share_their_architecture_and_cite_their_own_config() -> None:
    aliases = model_aliases()
    assert aliases["meta-llama/Llama-3.1-8B-Instruct"] == "meta-llama/Llama-3.1-8B"
    instruct, base = get_model("meta-llama/Llama-3.1-405B-Instruct"), get_model("meta-llama/Llama-3.1-405B")
    assert instruct.total_params() == base.total_params()
    assert instruct.kv_elements_per_token() == base.kv_elements_per_token()
    assert instruct.source.startswith("huggingface.co/meta-llama/Llama-3.1-405B-Instruct/")
    assert "meta-llama/Llama-3.1-405B" in instruct.source
    # the 2507 Qwen3 releases read 256k tokens where the base read 40k: the alias says so
    assert get_model("Qwen/Qwen3-235B-A22B-Instruct-2507").max_position_embeddings == 262_144
    assert get_model("Qwen/Qwen3-235B-A22B").max_position_embeddings == 40_960
    for alias, architecture in aliases.items():
        assert get_model(architecture).name == architecture, alias  # every alias points at a catalog entry


def test_unknown_ids_suggest_published_aliases() -> None:
    with pytest.raises(UnknownNameError) as exc:
        get_model("meta-llama/Llama-3.1-8B-Instruct-v2")
    assert "meta-llama/Llama-3.1-8B-Instruct" in exc.value.close_matches


@pytest.mark.parametrize(
    ("name", "total_b"),
    [("EleutherAI/gpt-j-6b", 6.05), ("Qwen/Qwen2.5-7B-Instruct", 7.61)],  # model cards: 6,053,381,344 and 7.61B
)
def test_new_architectures_match_their_model_cards(name: str, total_b: float) -> None:
    assert get_model(name).total_params() / 1e9 == pytest.approx(total_b, rel=0.02)


@pytest.mark.parametrize(
    "model_id", ["meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct"]
)
def test_llama4_at_tp64_on_trn2_pads_heads_as_nxd_inference_does(model_id: str) -> None:
    model = get_model(model_id)
    assert model.num_heads == 40
    assert model.num_kv_heads == 8
    dep = make_deployment(model_id, "trn2.48xlarge", 64)
    assert (dep.heads, dep.kv_heads) == (64, 64)  # one query head per rank (24 of padding), KV replicated
    assert dep.chips == 16
    # the padded heads are charged: TP64 holds more attention weight than the model has
    unpadded = model.total_params() * 2  # bf16
    assert dep.weight_bytes > unpadded
    point = simulate_point(model_id, "trn2.48xlarge", 64, 1, 1024, 128)
    assert point.ttft_ms > 0
    assert point.tpot_ms > 0


def test_the_live_fleet_and_the_offline_simulator_take_the_same_names() -> None:
    names = [*ISSUE_IDS[:2], "deepseek-ai/DeepSeek-R1-Distill-Llama-70B"]
    specs = parse_fleet(
        {
            "deployments": [
                {"name": name, "model": name, "instance": "trn2.48xlarge", "tp": 64 if "405B" in name else 16}
                for name in names
            ]
        }
    )
    pool = AcceleratorPool.from_specs(specs, time_scale=0)
    for spec in specs:
        backend = pool.backend(spec.name)
        assert backend.context_window == get_model(spec.name).max_position_embeddings
        args = ["point", "--model", spec.name, "--instance", "trn2.48xlarge", "--tp", str(spec.tp)]
        result = CliRunner().invoke(simulate, [*args, "--input-len", "512", "--output-len", "64", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["model"] == spec.name


def test_model_config_takes_any_hugging_face_config(tmp_path: Path) -> None:
    # a GPT-style config (n_embd, n_layer, n_head, no gate in the MLP), as GPT-J and GPT-NeoX publish them
    config = {"model_type": "gptj", "n_embd": 2048, "n_layer": 12, "n_head": 16, "vocab_size": 50400}
    path = tmp_path / "acme-gpt" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    args = ["point", "--model-config", str(path), "--instance", "trn1.32xlarge", "--tp", "8"]
    args += ["--input-len", "256", "--output-len", "32", "--json"]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["model"] == "acme-gpt"
    model = get_model("acme-gpt")
    assert model.intermediate_size == 4 * 2048
    assert not model.gated_mlp
    assert model.total_params() == 12 * (4 * 2048 * 2048 + 2 * 2048 * 8192) + 2 * 50400 * 2048
    named = CliRunner().invoke(simulate, [*args[:3], "--model", "acme/gpt-small", *args[3:]])
    assert named.exit_code == 0, named.output
    assert json.loads(named.output)["model"] == "acme/gpt-small"
    path.write_text(json.dumps({"n_embd": 2048}))
    bad = CliRunner().invoke(simulate, args)
    assert bad.exit_code != 0
    assert "num_hidden_layers" in bad.output
