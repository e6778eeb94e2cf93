"""The search space beyond instance, TP, replicas, batch, routing and weights: expert parallelism, chunk size, the KV
cache's element type, a disaggregated decode pool (CS-3 beside Trainium), and assumed prices for unpriced hardware."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.sim.disaggregated import DisaggregatedCluster
from switchyard.accelerator.sim.hardware import get_instance
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.search import (
    ConfigResult,
    SearchSettings,
    Slo,
    evaluate,
    evaluate_json,
    evaluation_args,
    search,
)
from switchyard.accelerator.sim.search_report import search_html
from switchyard.accelerator.sim.search_space import (
    Configuration,
    capacity_bound_rps,
    configuration_space,
    fleet_usd_per_hour,
    ttft_floor_ms,
)
from switchyard.accelerator.sim.workloads import poisson_workload

DENSE = "meta-llama/Llama-3.1-8B-Instruct"
MOE = "Qwen/Qwen3-30B-A3B"
SLO = Slo(ttft_ms=1000.0, tpot_ms=60.0)
SETTINGS = SearchSettings(requests=60)
CS3 = (("cs-3", "60"),)


def workload() -> list[Request]:
    return poisson_workload(60, 2.0, 2000, 128, seed=3)


def test_expert_parallelism_is_tried_for_mixture_of_experts_models_and_skipped_for_dense_ones() -> None:
    moe, moe_skipped = configuration_space(MOE, ["trn2.48xlarge"], tps=[8], parallelisms=["tp", "ep"])
    assert [c.parallelism for c in moe] == ["tp", "ep"]
    assert not moe_skipped
    assert moe[1].deployment().expert_parallel
    assert not moe[0].deployment().expert_parallel
    dense, dense_skipped = configuration_space(DENSE, ["trn2.48xlarge"], tps=[8], parallelisms=["tp", "ep"])
    assert [c.parallelism for c in dense] == ["tp"]
    assert [s.reason for s in dense_skipped] == [
        f"expert parallelism needs a mixture-of-experts model; {get_model_name(DENSE)} is dense"
    ]


def get_model_name(model: str) -> str:
    return Configuration(model, "trn2.48xlarge", 8, 1, 64, "least_load", "bf16").deployment().model.name


def test_the_chunk_size_is_the_engines_token_budget_and_bounds_the_first_chunk() -> None:
    small, large = (
        Configuration(DENSE, "trn2.48xlarge", 8, 1, 64, "least_load", "bf16", chunk_tokens=c) for c in (256, 2048)
    )
    assert small.engine().max_batched_tokens == 256
    # 2,000-token prompts: a 256-token first chunk is cheaper than a whole 2,000-token one
    assert ttft_floor_ms(small, workload()) < ttft_floor_ms(large, workload())
    # and prefill throughput at full chunks differs, so the bound moves too
    assert capacity_bound_rps(small, workload()) != capacity_bound_rps(large, workload())


def test_an_fp8_kv_cache_holds_twice_the_tokens() -> None:
    bf16, fp8 = (
        Configuration(DENSE, "trn2.48xlarge", 8, 1, 64, "least_load", "bf16", kv_dtype=kv).deployment()
        for kv in ("bf16", "fp8")
    )
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token


def test_a_decode_pool_needs_a_price_and_is_priced_beside_the_prefill_pool() -> None:
    space, skipped = configuration_space(DENSE, ["trn2.48xlarge"], tps=[8], decode_instances=["cs-3"], decode_tps=[1])
    assert [c.disaggregated for c in space] == [False]  # CS-3 has no published price
    assert [(s.instance, s.reason) for s in skipped] == [("trn2.48xlarge", "decode pool cs-3 TP1: no price")]
    priced, skipped = configuration_space(
        DENSE,
        ["trn2.48xlarge"],
        tps=[8],
        decode_instances=["cs-3"],
        decode_tps=[1],
        decode_replicas=[2],
        assumed_prices={"cs-3": Decimal(60)},
    )
    assert not skipped
    colocated, split = priced
    assert split.fleet_name == "trn2.48xlarge + cs-3"
    assert split.decode_replicas == 2
    assert isinstance(split.fleet(0), DisaggregatedCluster)
    trn2_chip_hour = get_instance("trn2.48xlarge").price_per_chip_hour()
    assert trn2_chip_hour is not None
    assert fleet_usd_per_hour(colocated) == 2 * trn2_chip_hour  # TP8: two chips of four ranks
    assert fleet_usd_per_hour(split, {"cs-3": Decimal(60)}) == 2 * trn2_chip_hour + 2 * 60


def test_a_search_over_the_new_options_ranks_each_fleet_type_apart() -> None:
    space, _ = configuration_space(
        DENSE,
        ["trn2.48xlarge"],
        tps=[8],
        chunk_tokens=[512, 2048],
        kv_dtypes=["bf16", "fp8"],
        decode_instances=["cs-3"],
        decode_tps=[1],
        assumed_prices={"cs-3": Decimal(60)},
    )
    assert len(space) == 2 * 2 * 2
    result = search(space, workload(), SLO, SearchSettings(requests=60, assumed_prices=CS3), prune=False)
    assert set(result.best_per_instance) <= {"trn2.48xlarge", "trn2.48xlarge + cs-3"}
    for name, best in result.best_per_instance.items():
        same_type = [r for r in result.evaluated if r.configuration.fleet_name == name and r.feasible]
        assert best.cost_per_million_tokens_usd == min(r.cost_per_million_tokens_usd for r in same_type)  # type: ignore[type-var]


@pytest.mark.parametrize(
    "config",
    [
        Configuration(MOE, "trn2.48xlarge", 8, 1, 64, "least_load", "bf16", parallelism="ep"),
        Configuration(DENSE, "trn2.48xlarge", 8, 1, 32, "least_load", "bf16", "tp", 512, "fp8", "cs-3", 1, 1),
    ],
    ids=["expert-parallel", "chunked-fp8-disaggregated"],
)
def test_a_worker_answers_what_evaluate_answers_here_for_every_option(config: Configuration) -> None:
    settings = SearchSettings(requests=60, assumed_prices=CS3)
    args = json.loads(json.dumps(evaluation_args(config, workload(), SLO, settings)))
    answered = json.loads(json.dumps(evaluate_json(*args)))
    assert ConfigResult.from_dict(answered) == evaluate(config, workload(), SLO, settings)


def test_results_written_before_the_new_options_read_as_their_defaults() -> None:
    old = {"model": DENSE, "instance": "trn2.48xlarge", "tp": 8, "replicas": 1, "max_batch": 64}
    old |= {"routing": "least_load", "weights": "bf16"}
    assert Configuration.from_dict(old) == Configuration(DENSE, "trn2.48xlarge", 8, 1, 64, "least_load", "bf16")


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        simulate,
        [
            *("search", "--model", DENSE, "--workload", "poisson:n=60,rate=2,prompt=2000,output=128,seed=3"),
            *("--slo-ttft-ms", "1000", "--slo-tpot-ms", "60", "--requests", "60", "--instances", "trn2.48xlarge"),
            *("--tp", "8"),
            *args,
        ],
    )
    return result.exit_code, result.output


def test_cli_searches_a_cs3_decode_pool_at_an_assumed_price_and_saves_the_plot(tmp_path: Path) -> None:
    plot = tmp_path / "pareto.svg"
    code, text = run_cli(
        *("--decode-instances", "cs-3", "--decode-tp", "1", "--assume-price", "cs-3=60", "--kv-dtype", "fp8"),
        *("--plot", str(plot)),
    )
    assert code == 0, text
    assert "decode on cs-3 TP1 x1" in text
    svg = plot.read_text()
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert "<rect" in svg  # the disaggregated fleet's points are squares


def test_cli_writes_no_plot_when_nothing_meets_the_slo(tmp_path: Path) -> None:
    plot = tmp_path / "pareto.svg"
    code, text = run_cli("--slo-tpot-ms", "0.001", "--plot", str(plot))
    assert code == 0, text
    assert not plot.exists()


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--assume-price", "cs-3", "INSTANCE=USD"),
        ("--assume-price", "cs-3=-5", "positive"),
        ("--assume-price", "trn2.48xlarge=10", "has a price in the catalog"),
        ("--assume-price", "cs-9=10", "INSTANCE=USD"),
        ("--parallelism", "dp", "choose from tp, ep"),
        ("--kv-dtype", "int4", "choose from"),
        ("--chunk-tokens", "0", "positive integers"),
        ("--decode-instances", "cs-9", "cs-9"),
    ],
)
def test_cli_bad_new_options_fail_naming_the_option(option: str, value: str, says: str) -> None:
    code, text = run_cli(option, value)
    assert code == 2
    assert option in text
    assert says in text


def test_the_report_names_the_decode_pool_and_its_assumed_price() -> None:
    space, skipped = configuration_space(
        DENSE,
        ["trn2.48xlarge"],
        tps=[8],
        decode_instances=["cs-3"],
        decode_tps=[1],
        assumed_prices={"cs-3": Decimal(60)},
    )
    result = search(space, workload(), SLO, SearchSettings(requests=60, assumed_prices=CS3), skipped=skipped)
    assert result.to_dict()["assumed_prices_usd_per_hour"] == {"cs-3": "60"}
    page = search_html(result, claims=[])
    assert "<td>cs-3</td><td>$60/h</td><td>assumed (given to the search: --assume-price)</td>" in page
    assert set(result.best_per_instance) == {"trn2.48xlarge", "trn2.48xlarge + cs-3"}
    assert "<td>trn2 + CS-3</td>" in page  # the disaggregated fleet's own family among the cheapest per family
    assert "decode on cs-3 TP1 x1" in page
