"""`simulate point | bench | run` speculate with any target and draft: --draft-model (or --draft-model-config),
--speculative-tokens and --acceptance-rate, a catalog pair's own draft and tokens as defaults; the JSON states the
speculation used, and a draft that cannot be modelled is refused naming the problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.sim.point import simulate_point

PAIR = "Qwen/Qwen3-32B (target) + Qwen/Qwen3-1.7B (draft)"
TARGET, DRAFT = "Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B"
POINT = ["point", "--instance", "trn2.3xlarge", "--tp", "4", "--input-len", "128", "--output-len", "512"]
# Qwen3-1.7B's config.json fields (models.json), for --draft-model-config
DRAFT_CONFIG = {
    "hidden_size": 2048,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 6144,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
}


def _json(args: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.output)
    return out


def _point(*options: str) -> dict[str, Any]:
    return _json([*POINT, *options, "--json"])


def test_a_draft_at_a_higher_acceptance_rate_decodes_faster() -> None:
    draft = ["--model", TARGET, "--draft-model", DRAFT, "--speculative-tokens", "7"]
    high, low = _point(*draft, "--acceptance-rate", "0.9"), _point(*draft, "--acceptance-rate", "0.3")
    plain = _point("--model", TARGET)
    assert high["tpot_ms"] < plain["tpot_ms"] < low["tpot_ms"]
    assert high["ttft_ms"] == low["ttft_ms"] > plain["ttft_ms"]  # the draft encodes the prompt too
    assert high["speculation"] == {"draft_model": DRAFT, "num_speculative_tokens": 7, "acceptance_rate": 0.9}
    assert plain["speculation"] is None
    library = simulate_point(TARGET, "trn2.3xlarge", 4, 1, 128, 512, draft_model=DRAFT, num_speculative_tokens=7)
    assert _point(*draft)["tpot_ms"] == library.tpot_ms
    assert _point(*draft)["speculation"]["acceptance_rate"] == 0.7


def test_options_override_a_catalog_pairs_own_draft_and_tokens() -> None:
    own = _point("--model", PAIR)
    assert own["speculation"] == {"draft_model": DRAFT, "num_speculative_tokens": 7, "acceptance_rate": 0.7}
    three = _point("--model", PAIR, "--speculative-tokens", "3")
    assert three["speculation"]["num_speculative_tokens"] == 3
    assert three["tpot_ms"] == _point("--model", TARGET, "--draft-model", DRAFT, "--speculative-tokens", "3")["tpot_ms"]
    assert three["tpot_ms"] != own["tpot_ms"]
    other = _point("--model", PAIR, "--draft-model", "Qwen/Qwen3-8B")
    assert other["speculation"]["draft_model"] == "Qwen/Qwen3-8B"
    assert other["speculation"]["num_speculative_tokens"] == 7
    assert other["tpot_ms"] > own["tpot_ms"]  # a larger draft, the same acceptance: slower drafting


def test_the_text_output_names_the_speculation() -> None:
    result = CliRunner().invoke(simulate, [*POINT, "--model", PAIR, "--acceptance-rate", "0.8"])
    assert result.exit_code == 0, result.output
    assert f"speculative decoding: draft {DRAFT}, 7 tokens a step, acceptance rate 0.8" in result.output


def test_a_draft_from_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / "my-draft" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(DRAFT_CONFIG))
    out = _point("--model", TARGET, "--draft-model-config", str(path), "--speculative-tokens", "7")
    assert out["speculation"]["draft_model"] == "my-draft"
    assert out["tpot_ms"] == _point("--model", PAIR)["tpot_ms"]  # the same fields as the catalog's Qwen3-1.7B
    named = _point(
        "--model",
        TARGET,
        "--draft-model-config",
        str(path),
        "--draft-model",
        "acme/draft-1.7b",
        "--speculative-tokens",
        "7",
    )
    assert named["speculation"]["draft_model"] == "acme/draft-1.7b"


def test_bench_serves_a_draft_faster_per_token_the_more_it_accepts(tmp_path: Path) -> None:
    def bench(rate: str) -> dict[str, Any]:
        args = ["bench", "--model", TARGET, "--instance", "trn2.3xlarge", "--tp", "4", "--concurrency", "2"]
        args += ["--requests", "6", "--input-len", "256", "--output-len", "64", "--json", "-"]
        return _json([*args, "--draft-model", DRAFT, "--speculative-tokens", "5", "--acceptance-rate", rate])

    high, low = bench("0.9"), bench("0.3")
    assert high["itl_ms"]["p50"] < low["itl_ms"]["p50"]
    assert high["speculation"] == {"draft_model": DRAFT, "num_speculative_tokens": 5, "acceptance_rate": 0.9}


def test_run_serves_a_workload_with_the_draft(tmp_path: Path) -> None:
    def run(*options: str) -> dict[str, Any]:
        out = tmp_path / "r.json"
        args = ["run", "--model", TARGET, "--instance", "trn2.3xlarge", "--tp", "4", "--no-progress"]
        args += ["--workload", "poisson:n=6,rate=2", "--json", str(out), *options]
        result = CliRunner().invoke(simulate, args)
        assert result.exit_code == 0, result.output
        summary: dict[str, Any] = json.loads(out.read_text())
        return summary

    spec = run("--draft-model", DRAFT, "--speculative-tokens", "5", "--acceptance-rate", "0.9")
    assert spec["speculation"] == {"draft_model": DRAFT, "num_speculative_tokens": 5, "acceptance_rate": 0.9}
    assert run()["speculation"] is None


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (["--model", TARGET, "--draft-model", "meta-llama/Llama-3.1-8B", "--speculative-tokens", "4"], "vocabulary"),
        (["--model", TARGET, "--draft-model", DRAFT], "num_speculative_tokens"),
        (["--model", TARGET, "--draft-model", DRAFT, "--speculative-tokens", "0"], "'--speculative-tokens'"),
        (["--model", PAIR, "--acceptance-rate", "1.5"], "'--acceptance-rate'"),
        (["--model", PAIR, "--acceptance-rate", "-0.1"], "'--acceptance-rate'"),
        (["--model", TARGET, "--acceptance-rate", "0.7"], "no draft model: an acceptance rate"),
        (["--model", TARGET, "--speculative-tokens", "3"], "no draft model: speculative tokens"),
        (["--model", TARGET, "--draft-model", "Qwen/Qwen3-1.7X", "--speculative-tokens", "3"], "unknown model"),
    ],
)
def test_speculation_that_cannot_be_modelled_is_refused_naming_the_problem(options: list[str], problem: str) -> None:
    for command in (POINT, ["bench", *POINT[1:5], "--concurrency", "1", "--requests", "2", *POINT[5:]]):
        result = CliRunner().invoke(simulate, [*command, *options])
        assert result.exit_code != 0
        assert problem in result.output, result.output


def test_a_draft_config_of_another_attention_window_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "windowed-draft" / "config.json"
    path.parent.mkdir()
    layers = ["sliding_attention"] * DRAFT_CONFIG["num_hidden_layers"]  # type: ignore[operator]
    path.write_text(json.dumps(DRAFT_CONFIG | {"sliding_window": 4096, "layer_types": layers}))
    result = CliRunner().invoke(
        simulate, [*POINT, "--model", TARGET, "--draft-model-config", str(path), "--speculative-tokens", "4"]
    )
    assert result.exit_code != 0
    assert "window of 4096 tokens" in result.output
    assert "another attention window is not modelled" in result.output
