"""A search in waves (the evaluation strategy of `--workers celery`): results out of order, pruning between waves,
the same Pareto front and cheapest per instance as the sequential search; the JSON a worker receives and returns."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from switchyard.accelerator import cli
from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.search import (
    SEARCH_VERSION,
    ConfigResult,
    SearchProgress,
    SearchResult,
    SearchSettings,
    Slo,
    evaluate,
    evaluate_json,
    evaluation_args,
    search,
)
from switchyard.accelerator.sim.search_space import Configuration, configuration_space
from switchyard.accelerator.sim.workloads import poisson_workload

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SLO = Slo(ttft_ms=1000.0, tpot_ms=60.0)
SETTINGS = SearchSettings(requests=60)
WORKLOAD_SPEC = "poisson:n=60,rate=2,prompt=512,output=128,seed=1"


def workload() -> list[Request]:
    return poisson_workload(60, 2.0, 512, 128, seed=1)


def space() -> list[Configuration]:
    instances = ["trn2.48xlarge", "inf2.48xlarge", "trn1.32xlarge", "p4d.24xlarge"]
    configs, _ = configuration_space(MODEL, instances, tps=[1, 2, 4, 8], replicas=[1, 2], max_batches=[4, 64])
    return configs


@pytest.fixture(scope="module")
def unpruned() -> SearchResult:
    """Every configuration evaluated: the truth the searches below are held to, and the results they are served."""
    return search(space(), workload(), SLO, SETTINGS, prune=False)


class Shuffled:
    """A wave evaluator that answers from known results, each wave's in a shuffled order, and records the waves."""

    def __init__(self, known: Iterable[ConfigResult], seed: int) -> None:
        self.known = {r.configuration: r for r in known}
        self.rng = random.Random(seed)
        self.waves: list[list[Configuration]] = []

    def __call__(
        self, configs: Sequence[Configuration], workload: Sequence[Request], slo: Slo, settings: SearchSettings
    ) -> Iterable[ConfigResult]:
        self.waves.append(list(configs))
        answers = [self.known[c] for c in configs]
        self.rng.shuffle(answers)
        yield from answers


def answer(r: SearchResult) -> tuple[object, object]:
    return [x.to_dict() for x in r.pareto], {k: x.to_dict() for k, x in r.best_per_instance.items()}


def test_pruning_keeps_the_front_and_the_cheapest_of_every_instance(unpruned: SearchResult) -> None:
    """Here every trn1.32xlarge configuration is beaten on both axes by a trn2.48xlarge one: pruning on the front
    alone would leave trn1 without a cheapest configuration."""
    local = search(space(), workload(), SLO, SETTINGS, evaluate_wave=Shuffled(unpruned.evaluated, 0))
    assert local.pruned > 0
    assert answer(local) == answer(unpruned)
    assert set(local.best_per_instance) == {"trn2.48xlarge", "inf2.48xlarge", "trn1.32xlarge", "p4d.24xlarge"}


@pytest.mark.parametrize(("wave_size", "seed"), [(1, 0), (3, 1), (5, 2), (8, 3), (100, 4)])
def test_waves_answered_out_of_order_find_what_the_sequential_search_finds(
    unpruned: SearchResult, wave_size: int, seed: int
) -> None:
    sequential = search(space(), workload(), SLO, SETTINGS, evaluate_wave=Shuffled(unpruned.evaluated, 0))
    evaluator = Shuffled(unpruned.evaluated, seed)
    waved = search(space(), workload(), SLO, SETTINGS, evaluate_wave=evaluator, wave_size=wave_size)
    assert answer(waved) == answer(sequential)
    assert all(1 <= len(w) <= wave_size for w in evaluator.waves)
    sent = [c for w in evaluator.waves for c in w]
    assert len(sent) == len(set(sent)) == waved.simulated == waved.configurations_evaluated
    assert waved.configurations_evaluated + waved.pruned == len(space())
    # `evaluated` keeps the order of the bounds, whatever order the results came back in.
    order = [r.configuration for r in unpruned.evaluated]  # prune=False evaluates in bound order
    positions = [order.index(r.configuration) for r in waved.evaluated]
    assert positions == sorted(positions)
    if wave_size >= len(space()):
        assert waved.pruned == 0  # one wave: nothing back to prune against
    if wave_size == 1:
        assert waved.to_dict() == sequential.to_dict()


def test_each_wave_is_pruned_against_the_results_of_the_waves_before(unpruned: SearchResult) -> None:
    sequential = search(space(), workload(), SLO, SETTINGS, evaluate_wave=Shuffled(unpruned.evaluated, 0))
    evaluator = Shuffled(unpruned.evaluated, 5)
    waved = search(space(), workload(), SLO, SETTINGS, evaluate_wave=evaluator, wave_size=5)
    assert waved.pruned > 0
    assert all(len(w) == 5 for w in evaluator.waves[:-1])  # a wave is filled with configurations not pruned
    # A wave is sent before its own results are back, so it evaluates some configuration the sequential search
    # pruned, and finds the same answer all the same.
    assert {r.configuration for r in waved.evaluated} > {r.configuration for r in sequential.evaluated}
    assert answer(waved) == answer(sequential)


def test_progress_hears_of_every_configuration_once(unpruned: SearchResult, tmp_path: Path) -> None:
    heard: list[SearchProgress] = []
    configs = space()
    evaluator = Shuffled(unpruned.evaluated, 6)

    def run() -> SearchResult:
        return search(
            configs,
            workload(),
            SLO,
            SETTINGS,
            evaluate_wave=evaluator,
            wave_size=4,
            on_progress=heard.append,
            cache_dir=tmp_path,
        )

    first = run()
    assert [p.done for p in heard] == list(range(1, len(configs) + 1))
    assert all(p.total == len(configs) for p in heard)
    assert sum(p.result is None for p in heard) == heard[-1].pruned == first.pruned
    assert {p.wave for p in heard if p.result is not None} == set(range(1, len(evaluator.waves) + 1))
    heard.clear()
    second = run()
    assert second.simulated == 0
    assert all(p.cached and p.wave == 0 for p in heard if p.result is not None)
    assert answer(second) == answer(first)


def test_a_wave_answered_with_a_stranger_or_not_at_all_is_an_error(unpruned: SearchResult) -> None:
    stranger = unpruned.evaluated[-1]

    def wrong(
        configs: Sequence[Configuration], workload: Sequence[Request], slo: Slo, settings: SearchSettings
    ) -> Iterable[ConfigResult]:
        return [stranger]

    with pytest.raises(ConfigurationError, match="not sent"):
        search(space()[:1], workload(), SLO, SETTINGS, evaluate_wave=wrong)

    with pytest.raises(ConfigurationError, match="no result came back"):
        search(space(), workload(), SLO, SETTINGS, evaluate_wave=lambda *args: [])


def test_a_worker_gets_json_and_answers_what_evaluate_answers_here() -> None:
    config = Configuration(MODEL, "trn2.48xlarge", 8, 1, 64, "least_load", "bf16")
    requests = [*workload()[:-1], Request(99, 40.0, 300, 20, session="s", block_hashes=(1, 2, 3))]
    args = json.loads(json.dumps(evaluation_args(config, requests, SLO, SETTINGS)))
    assert len(args[1]) == SETTINGS.requests
    answered = json.loads(json.dumps(evaluate_json(*args)))
    assert ConfigResult.from_dict(answered) == evaluate(config, requests, SLO, SETTINGS)


def test_a_worker_of_another_search_version_refuses_the_job() -> None:
    config = Configuration(MODEL, "trn2.48xlarge", 8, 1, 64, "least_load", "bf16")
    configuration, requests, slo, settings = evaluation_args(config, workload(), SLO, SETTINGS)
    with pytest.raises(ConfigurationError, match="version"):
        evaluate_json(configuration, requests, slo, {**settings, "search_version": SEARCH_VERSION + 1})


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli.simulate,
        [
            *("search", "--model", MODEL, "--workload", WORKLOAD_SPEC, "--slo-ttft-ms", "1000"),
            *("--slo-tpot-ms", "60", "--requests", "60", "--instances", "trn2.48xlarge", "--tp", "4,8"),
            *args,
        ],
    )
    return result.exit_code, result.stdout, result.stderr


def test_cli_refuses_workers_nobody_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_SEARCH_WORKERS", {})  # as when the platform's command has not mounted the group
    code, _, err = run_cli("--workers", "celery")
    assert code == 2
    assert "--workers" in err
    assert "switchyard simulate search" in err  # where celery comes from


def test_cli_sends_waves_to_registered_workers_and_prints_results_as_they_arrive(
    unpruned: SearchResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluator = Shuffled(unpruned.evaluated, 7)
    timeouts: list[float | None] = []
    monkeypatch.setitem(cli._SEARCH_WORKERS, "test", lambda timeout: timeouts.append(timeout) or evaluator)
    code, out, err = run_cli(
        "--workers", "test", "--worker-timeout", "30", "--wave-size", "2", "--progress", "--json", "-"
    )
    assert code == 0, err
    assert timeouts == [30.0]  # the registered factory hears --worker-timeout
    assert [len(w) for w in evaluator.waves] == [2]  # two configurations, one wave
    assert err.count("configurations done") == 2
    assert "2/2 configurations done (0 pruned)" in err
    assert "(wave 1)" in err
    local_code, local_out, _ = run_cli("--json", "-")
    assert local_code == 0
    assert json.loads(out)["pareto"] == json.loads(local_out)["pareto"]
