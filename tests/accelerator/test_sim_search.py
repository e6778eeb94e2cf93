"""The configuration search: max rate by bisection, Pareto front, pruning, caching, skipped configurations, CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.search import ConfigResult, SearchResult, SearchSettings, Slo, evaluate, search
from switchyard.accelerator.sim.search_space import Configuration, configuration_space
from switchyard.accelerator.sim.workloads import poisson_workload, scale_rate

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SLO = Slo(ttft_ms=1000.0, tpot_ms=60.0)
SETTINGS = SearchSettings(requests=100)
WORKLOAD_SPEC = "poisson:n=100,rate=2,prompt=512,output=128,seed=1"


def workload() -> list[Request]:
    return poisson_workload(100, 2.0, 512, 128, seed=1)


def space() -> list[Configuration]:
    configs, _ = configuration_space(
        MODEL, ["trn2.48xlarge", "inf2.48xlarge", "trn1.32xlarge"], tps=[2, 4, 8, 16], max_batches=[4, 64]
    )
    return configs


def meets_slo(config: Configuration, requests: Sequence[Request], rate_rps: float) -> bool:
    """Serve the requests at `rate_rps` on the configuration and check the SLO independently of the search."""
    base_rps = (len(requests) - 1) / (requests[-1].arrival_s - requests[0].arrival_s)
    cluster = Cluster(
        config.deployment(), config.replicas, config.routing, config=EngineConfig(max_batch=config.max_batch)
    )
    finished = cluster.run(scale_rate(requests, rate_rps / base_rps))
    assert all(f.rejected is None for f in finished)
    ttft = np.percentile([f.ttft_ms for f in finished], SLO.percentile)
    tpot = np.percentile([f.tpot_ms for f in finished if f.output_tokens > 1], SLO.percentile)
    return bool(ttft <= SLO.ttft_ms and tpot <= SLO.tpot_ms)


@pytest.mark.parametrize(("instance", "tp"), [("trn2.48xlarge", 8), ("inf2.48xlarge", 4), ("trn1.32xlarge", 8)])
def test_the_max_rate_meets_the_slo_and_fifteen_percent_more_does_not(instance: str, tp: int) -> None:
    config = Configuration(MODEL, instance, tp, 1, 64, "least_load", "bf16")
    result = evaluate(config, workload(), SLO, SETTINGS)
    assert result.max_rate_rps > 0
    assert not result.rate_capped
    assert meets_slo(config, workload(), result.max_rate_rps)
    assert not meets_slo(config, workload(), 1.15 * result.max_rate_rps)
    assert result.ttft_p90_ms <= SLO.ttft_ms


def test_cost_is_the_fleet_price_over_the_output_tokens_per_hour_at_the_max_rate() -> None:
    config = Configuration(MODEL, "trn2.48xlarge", 8, 2, 64, "round_robin", "bf16")
    result = evaluate(config, workload(), SLO, SETTINGS)
    # Two replicas of 2 chips of a 16-chip, $46.98/h trn2.48xlarge.
    assert float(result.fleet_usd_per_hour) == pytest.approx(4 * 46.98 / 16)
    assert result.cost_per_million_tokens_usd is not None
    tokens_per_hour = result.max_rate_rps * np.mean([r.output_tokens for r in workload()]) * 3600
    assert float(result.cost_per_million_tokens_usd) == pytest.approx(4 * 46.98 / 16 * 1e6 / tokens_per_hour, 1e-3)
    assert result.qps_per_dollar == pytest.approx(result.max_rate_rps / (4 * 46.98 / 16))


def test_an_slo_no_rate_meets_leaves_the_configuration_infeasible() -> None:
    config = Configuration(MODEL, "inf2.48xlarge", 2, 1, 64, "least_load", "bf16")
    result = evaluate(config, workload(), Slo(ttft_ms=1.0, tpot_ms=60.0), SETTINGS)
    assert result.max_rate_rps == 0.0
    assert not result.feasible
    assert result.to_dict()["ttft_p90_ms"] is None  # JSON has no infinity
    assert ConfigResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def dominates(a: ConfigResult, b: ConfigResult) -> bool:
    assert a.cost_per_million_tokens_usd is not None
    assert b.cost_per_million_tokens_usd is not None
    no_worse = a.cost_per_million_tokens_usd <= b.cost_per_million_tokens_usd and a.ttft_p90_ms <= b.ttft_p90_ms
    better = a.cost_per_million_tokens_usd < b.cost_per_million_tokens_usd or a.ttft_p90_ms < b.ttft_p90_ms
    return no_worse and better


@pytest.fixture(scope="module")
def unpruned() -> SearchResult:
    return search(space(), workload(), SLO, SETTINGS, prune=False)


def test_the_pareto_front_is_non_dominated_and_covers_every_evaluated_point(unpruned: SearchResult) -> None:
    front = unpruned.pareto
    assert len(front) > 1  # a trade-off: pruning on cost alone would lose the dearer, faster points
    assert not any(dominates(a, b) for a in front for b in front)
    for r in unpruned.evaluated:
        if r.feasible:
            assert r in front or any(dominates(f, r) for f in front)


def test_pruning_skips_configurations_but_never_one_on_the_front(unpruned: SearchResult) -> None:
    pruned = search(space(), workload(), SLO, SETTINGS)
    assert pruned.pruned > 0
    assert pruned.configurations_evaluated + pruned.pruned == unpruned.configurations_evaluated
    assert [r.to_dict() for r in pruned.pareto] == [r.to_dict() for r in unpruned.pareto]
    assert pruned.best_per_instance.keys() == unpruned.best_per_instance.keys()


def test_a_cached_search_simulates_nothing_and_answers_the_same(tmp_path: Path) -> None:
    configs = space()[:4]
    first = search(configs, workload(), SLO, SETTINGS, cache_dir=tmp_path)
    assert first.simulated == first.configurations_evaluated > 0

    def must_not_run(*args: object) -> ConfigResult:
        raise AssertionError("a cached configuration was simulated again")

    second = search(configs, workload(), SLO, SETTINGS, cache_dir=tmp_path, evaluator=must_not_run)
    assert second.simulated == 0
    assert second.to_dict() | {"simulated": 0} == first.to_dict() | {"simulated": 0}
    # Another SLO is another question: nothing of the cache answers it.
    third = search(configs, workload(), Slo(ttft_ms=900.0, tpot_ms=60.0), SETTINGS, cache_dir=tmp_path)
    assert third.simulated == third.configurations_evaluated


def test_invalid_tp_degrees_and_unpriced_instances_are_skipped_with_reasons() -> None:
    instances = ["inf2.48xlarge", "p4d.24xlarge", "trn3-gen1-ultraserver"]
    configs, skipped = configuration_space(MODEL, instances, tps=[1, 3, 8, 32])
    reasons = {(s.instance, s.tp): s.reason for s in skipped}
    assert reasons[("trn3-gen1-ultraserver", 8)] == "no price"
    assert "do not fit" in reasons[("inf2.48xlarge", 1)]
    assert "outside 1..24" in reasons[("inf2.48xlarge", 32)]
    assert "valid TP degrees" in reasons[("p4d.24xlarge", 3)]  # a GPU's TP must divide the heads
    assert [(c.instance, c.tp) for c in configs] == [
        ("inf2.48xlarge", 3),
        ("inf2.48xlarge", 8),
        ("p4d.24xlarge", 1),
        ("p4d.24xlarge", 8),
    ]
    assert len(skipped) == 3 * 4 - len(configs)


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(simulate, ["search", "--model", MODEL, *args])
    return result.exit_code, result.output


def test_cli_writes_json_with_the_documented_keys(tmp_path: Path) -> None:
    out = tmp_path / "search.json"
    code, text = run_cli(
        *("--workload", WORKLOAD_SPEC, "--slo-ttft-ms", "1000", "--slo-tpot-ms", "60", "--requests", "100"),
        *("--instances", "trn2.48xlarge,trn3-gen1-ultraserver", "--tp", "4,8", "--json", str(out)),
    )
    assert code == 0, text
    d = json.loads(out.read_text())
    assert {"configurations_evaluated", "pruned", "skipped", "pareto", "best_per_instance", "slo", "workload"} <= set(d)
    assert d["slo"] == {"definition": "percentile", "ttft_ms": 1000.0, "tpot_ms": 60.0, "percentile": 90.0}
    assert d["workload"]["spec"] == WORKLOAD_SPEC
    assert {s["reason"] for s in d["skipped"]} == {"no price"}
    entry_keys = {"instance", "tp", "replicas", "max_batch", "routing", "weights", "max_rate_rps"}
    entry_keys |= {"cost_per_million_tokens_usd", "ttft_p90_ms", "tpot_p90_ms", "qps_per_dollar"}
    assert entry_keys <= set(d["pareto"][0])
    assert set(d["best_per_instance"]) == {"trn2.48xlarge"}


def test_cli_prints_the_front_and_the_cheapest_per_instance() -> None:
    code, text = run_cli(
        *("--workload", WORKLOAD_SPEC, "--slo-ttft-ms", "1000", "--slo-tpot-ms", "60", "--requests", "50"),
        *("--instances", "trn2.48xlarge", "--tp", "8"),
    )
    assert code == 0, text
    assert "Pareto front" in text
    assert "Cheapest per instance" in text
    assert "trn2.48xlarge" in text


def test_cli_writes_the_report_with_each_slo_of_the_sensitivity(tmp_path: Path) -> None:
    report = tmp_path / "search.html"
    code, text = run_cli(
        *("--workload", WORKLOAD_SPEC, "--slo-ttft-ms", "1000", "--slo-tpot-ms", "60", "--requests", "50"),
        *("--instances", "trn2.48xlarge", "--tp", "8", "--report", str(report), "--sensitivity", "0.5,2"),
    )
    assert code == 0, text
    page = report.read_text()
    assert page.lower().startswith("<!doctype html>")
    assert "Pareto front" in page
    for limit in ("500", "1000", "2000"):  # this search's TTFT limit and the two searched again
        assert f"TTFT &lt;= {limit} ms" in page


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--tp", "2,x"),
        ("--sensitivity", "0,2"),
        ("--replicas", "0"),
        ("--routing", "fastest"),
        ("--weights", "fp4"),
        ("--instances", "trn9.big"),
        ("--percentile", "120"),
    ],
)
def test_cli_bad_options_fail_naming_the_option(option: str, value: str) -> None:
    args = {
        "--workload": WORKLOAD_SPEC,
        "--slo-ttft-ms": "1000",
        "--slo-tpot-ms": "60",
        "--instances": "trn2.48xlarge",
        option: value,
    }
    code, text = run_cli(*[x for kv in args.items() for x in kv])
    assert code == 2
    assert option in text
