"""Speculative decoding in `simulate compare` and `simulate search`: the draft, its tokens and acceptance rate apply
to every fleet compared and every configuration searched, and a search's cache never answers a configuration with a
draft from one without (nor the other way round)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.search import SEARCH_VERSION, SearchSettings, Slo, cache_key, search, workload_hash
from switchyard.accelerator.sim.search_space import configuration_space

TARGET, DRAFT = "Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B"
DRAFTED = {"draft_model": DRAFT, "num_speculative_tokens": 7, "acceptance_rate": 0.9}
SLO = Slo(ttft_ms=5000.0, tpot_ms=200.0)
SETTINGS = SearchSettings(requests=8, max_steps=3)
WORKLOAD = "poisson:n=8,rate=0.5,input=128,output=64"
FLEET = ["--model", TARGET, "--workload", WORKLOAD]


def _workload() -> list[Request]:
    return [Request(request_id=i, arrival_s=2.0 * i, prompt_tokens=128, output_tokens=64) for i in range(8)]


def test_every_configuration_of_the_space_carries_the_draft() -> None:
    plain, _ = configuration_space(TARGET, ["trn2.3xlarge"], tps=[4])
    drafted, _ = configuration_space(TARGET, ["trn2.3xlarge"], tps=[4], **DRAFTED)  # type: ignore[arg-type]
    assert [c.deployment().speculation for c in plain] == [None]
    (config,) = drafted
    speculation = config.deployment().speculation
    assert speculation is not None
    assert speculation.to_dict() == DRAFTED
    assert "draft Qwen/Qwen3-1.7B" in config.label()
    # a draft that does not fit beside the target skips the configuration, saying why
    small, skipped = configuration_space("Qwen/Qwen3-32B", ["trn2.3xlarge"], tps=[1, 4], draft_model="Qwen/Qwen3-8B")
    assert small == []
    assert {s.tp for s in skipped} == {1, 4}


def test_the_cache_key_tells_a_draft_apart_and_keeps_the_keys_without_one() -> None:
    sha = workload_hash(_workload())
    (plain,), _ = configuration_space(TARGET, ["trn2.3xlarge"], tps=[4])
    (drafted,), _ = configuration_space(TARGET, ["trn2.3xlarge"], tps=[4], **DRAFTED)  # type: ignore[arg-type]
    (other_rate,), _ = configuration_space(
        TARGET,
        ["trn2.3xlarge"],
        tps=[4],
        **(DRAFTED | {"acceptance_rate": 0.3}),  # type: ignore[arg-type]
    )
    keys = {cache_key(c, sha, SLO, SETTINGS) for c in (plain, drafted, other_rate)}
    assert len(keys) == 3
    # without speculation, the key is the one written before the fields existed: caches stay valid
    before = {k: v for k, v in asdict(plain).items() if k not in DRAFTED}
    inputs = {"version": SEARCH_VERSION, "configuration": before, "workload": sha}
    inputs |= {"slo": asdict(SLO), "settings": asdict(SETTINGS)}
    old_key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:32]
    assert cache_key(plain, sha, SLO, SETTINGS) == old_key


def test_a_cached_search_without_a_draft_is_not_reused_for_one_with_a_draft(tmp_path: Path) -> None:
    plain_space, _ = configuration_space(TARGET, ["trn2.3xlarge"], tps=[4])
    drafted_space, _ = configuration_space(TARGET, ["trn2.3xlarge"], tps=[4], **DRAFTED)  # type: ignore[arg-type]
    plain = search(plain_space, _workload(), SLO, SETTINGS, cache_dir=tmp_path, prune=False)
    drafted = search(drafted_space, _workload(), SLO, SETTINGS, cache_dir=tmp_path, prune=False)
    assert plain.simulated == drafted.simulated == 1  # the draft's configuration was simulated, not read
    assert len(list(tmp_path.glob("*.json"))) == 2
    (p,), (d,) = plain.evaluated, drafted.evaluated
    assert d.configuration.draft_model == DRAFT
    assert d.tpot_p90_ms != p.tpot_p90_ms  # simulated with its draft, not a copy of the plain result
    again = search(drafted_space, _workload(), SLO, SETTINGS, cache_dir=tmp_path, prune=False)
    assert again.simulated == 0  # its own cached result answers it


def test_search_takes_the_speculation_options(tmp_path: Path) -> None:
    args = ["search", *FLEET, "--slo-ttft-ms", "5000", "--slo-tpot-ms", "200", "--instances", "trn2.3xlarge"]
    args += ["--tp", "4", "--requests", "8", "--json", str(tmp_path / "out.json")]
    spec = ["--draft-model", DRAFT, "--speculative-tokens", "7", "--acceptance-rate", "0.9"]
    result = CliRunner().invoke(simulate, [*args, *spec])
    assert result.exit_code == 0, result.output
    (evaluated,) = json.loads((tmp_path / "out.json").read_text())["evaluated"]
    assert {k: evaluated[k] for k in DRAFTED} == DRAFTED
    refused = CliRunner().invoke(simulate, [*args, "--speculative-tokens", "3"])
    assert refused.exit_code != 0
    assert "has no draft model" in refused.output


def test_compare_serves_every_fleet_with_the_draft() -> None:
    args = ["compare", *FLEET, "--fleet", "trn2.3xlarge:tp=4"]
    plain = CliRunner().invoke(simulate, args)
    drafted = CliRunner().invoke(
        simulate, [*args, "--draft-model", DRAFT, "--speculative-tokens", "7", "--acceptance-rate", "0.9"]
    )
    assert plain.exit_code == drafted.exit_code == 0, plain.output + drafted.output
    assert "speculative decoding" not in plain.output
    assert "speculative decoding: draft Qwen/Qwen3-1.7B, 7 tokens a step, acceptance rate 0.9" in drafted.output

    def tpot_p50(output: str) -> float:
        row = output.splitlines()[1].split()
        return float(row[5])

    assert tpot_p50(drafted.output) < tpot_p50(plain.output) * 0.6
    refused = CliRunner().invoke(simulate, [*args, "--acceptance-rate", "0.9"])
    assert refused.exit_code != 0
    assert "has no draft model" in refused.output
