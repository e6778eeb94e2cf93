"""The capacity search of the operator console (``simulation.capacity``) on a recorded workload: its default
objective is today's p90 TTFT on the model's current deployment, it answers the cheapest configuration per instance
type and the Pareto front, prices what the catalog does not at the price assumed, stays within its bounds, and runs
off the event loop, one search at a time."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from switchyard.accelerator.pool import AcceleratorPool, load_fleet
from switchyard.accelerator.sim.workloads import poisson_workload
from switchyard.platform.simulation.capacity import (
    DEFAULT_TPOT_MS,
    DEFAULT_TTFT_MS,
    MAX_CONFIGURATIONS,
    CapacityError,
    CapacityQuestion,
    CapacitySearchBusy,
    answer_capacity,
    baseline,
    current_deployment,
    default_tps,
    instance_choices,
    run_capacity_search,
    simulator_model,
)
from switchyard.platform.simulation.traffic import RecordedWorkload

SERVED = "meta-llama/Llama-3.1-8B-Instruct"  # the default fleet's: 2 x trn2.48xlarge at TP 8
TRN3 = "trn3-gen1-ultraserver"


def _workload(requests: int = 60) -> RecordedWorkload:
    simulated = poisson_workload(requests, 2.0, 512, 128, seed=1)
    first = datetime(2026, 12, 1, tzinfo=UTC)
    return RecordedWorkload(
        model=SERVED,
        since=first - timedelta(days=1),
        until=first + timedelta(days=6),
        recorded=requests,
        first_at=first,
        last_at=first + timedelta(seconds=simulated[-1].arrival_s),
        mean_prompt_tokens=512.0,
        mean_output_tokens=128.0,
        cached_prompt_share=0.0,
        requests=simulated,
    )


def test_a_served_model_is_simulated_as_its_deployment_s_catalog_model() -> None:
    current = current_deployment(SERVED, "")
    assert current is not None
    assert (current.model, current.instance, current.tp, current.replicas) == (
        "meta-llama/Llama-3.1-8B",
        "trn2.48xlarge",
        8,
        2,
    )
    assert simulator_model(SERVED, "") == "meta-llama/Llama-3.1-8B"
    assert simulator_model("llama-3.1-8b-instruct", "") == "meta-llama/Llama-3.1-8B"  # the derived alias
    assert default_tps(current) == (4, 8, 16)
    assert current_deployment("BAAI/bge-large-en-v1.5", "") is None  # an embedding model serves no chat
    assert current_deployment("gpt-4o", "") is None
    with pytest.raises(CapacityError, match="no model for 'gpt-4o'"):
        simulator_model("gpt-4o", "")
    names = [c.name for c in instance_choices()]
    assert TRN3 in names
    assert names.index("trn2.48xlarge") < names.index("p5.48xlarge")  # Trainium first


async def test_capacity_planning_replays_the_deployment_the_fleet_serves_speculation_included(tmp_path: Path) -> None:
    drafted = {"name": "qwen", "model": "Qwen/Qwen3-32B", "instance": "trn2.3xlarge", "tp": 4}
    drafted |= {"draft_model": "Qwen/Qwen3-1.7B", "num_speculative_tokens": 7, "acceptance_rate": 0.9}
    plain = drafted | {"name": "qwen-plain", "draft_model": "", "num_speculative_tokens": None, "acceptance_rate": None}
    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps({"deployments": [drafted, plain]}))
    pool = AcceleratorPool.from_specs(load_fleet(fleet), time_scale=0)
    try:
        served = {name: pool.backend(name).deployment for name in ("qwen", "qwen-plain")}  # type: ignore[attr-defined]
    finally:
        await pool.aclose()
    current = current_deployment("qwen", str(fleet))
    assert current is not None
    assert (current.draft_model, current.num_speculative_tokens, current.acceptance_rate) == ("Qwen/Qwen3-1.7B", 7, 0.9)
    assert current.deployment() == served["qwen"]
    assert current.deployment().speculation is not None
    current_plain = current_deployment("qwen-plain", str(fleet))
    assert current_plain is not None
    assert current_plain.deployment() == served["qwen-plain"]
    # today's latency is measured with the draft: its TPOT is the drafted deployment's, below the target's alone
    workload = _workload(20).requests
    with_draft, without = baseline(workload, current), baseline(workload, current_plain)
    assert with_draft is not None
    assert without is not None
    assert with_draft.tpot_p90_ms < without.tpot_p90_ms
    # and the alternatives searched speculate as it does
    question = CapacityQuestion(instances=("trn2.3xlarge",), tps=(4,), replicas=(1,), ttft_ms=1e4, tpot_ms=1e3)
    answer = answer_capacity(_workload(20), question, model=current.model, current=current)
    (best,) = answer.best_per_instance
    assert best.configuration.deployment() == served["qwen"]


def test_the_search_answers_within_today_s_p90_ttft_by_default() -> None:
    current = current_deployment(SERVED, "")
    question = CapacityQuestion(instances=("trn2.48xlarge", "p5.48xlarge"), tps=(4, 8), replicas=(1,))

    answer = answer_capacity(_workload(), question, model=simulator_model(SERVED, ""), current=current)

    assert answer.baseline is not None
    assert answer.ttft_from == "current deployment"
    assert answer.slo.ttft_ms == math.ceil(answer.baseline.ttft_p90_ms)
    assert (answer.tpot_from, answer.slo.tpot_ms, answer.slo.percentile) == ("default", DEFAULT_TPOT_MS, 90.0)
    assert answer.complete
    assert answer.configurations == 4
    assert answer.evaluated + answer.pruned == 4
    assert answer.best_per_instance, "no configuration met today's latency"
    for best in answer.best_per_instance:
        assert best.feasible
        assert best.ttft_p90_ms <= answer.slo.ttft_ms
        assert best.configuration.instance in question.instances
    costs = [r.cost_per_million_tokens_usd for r in answer.best_per_instance]
    assert costs == sorted(costs)  # type: ignore[type-var]
    assert answer.pareto[0].cost_per_million_tokens_usd == costs[0]  # the front starts at the cheapest
    assert answer.assumed_prices == {}


def test_an_instance_type_without_a_price_is_costed_at_the_price_assumed() -> None:
    question = CapacityQuestion(
        instances=(TRN3,), tps=(4, 8), replicas=(1,), ttft_ms=5000.0, assumed_prices=((TRN3, Decimal("200")),)
    )
    answer = answer_capacity(_workload(), question, model="meta-llama/Llama-3.1-8B", current=None)
    assert answer.ttft_from == "form"
    assert [r.configuration.instance for r in answer.best_per_instance] == [TRN3]
    best = answer.best_per_instance[0]
    chips = best.configuration.deployment().chips
    assert best.fleet_usd_per_hour == Decimal(chips) * Decimal(200) / 64  # 64 chips in the UltraServer
    assert answer.assumed_prices == {TRN3: Decimal("200")}
    unpriced = CapacityQuestion(instances=(TRN3,), tps=(4,), replicas=(1,))
    with pytest.raises(CapacityError, match="no price"):
        answer_capacity(_workload(), unpriced, model="meta-llama/Llama-3.1-8B", current=None)


def test_without_a_current_deployment_the_stated_default_objective_applies() -> None:
    question = CapacityQuestion(instances=("trn2.48xlarge",), tps=(8,), replicas=(1,))
    answer = answer_capacity(_workload(), question, model="meta-llama/Llama-3.1-8B", current=None)
    assert answer.baseline is None
    assert (answer.ttft_from, answer.slo.ttft_ms) == ("default", DEFAULT_TTFT_MS)


def test_the_search_stops_at_its_time_limit_with_what_it_has() -> None:
    question = CapacityQuestion(instances=("trn2.48xlarge", "p5.48xlarge"), tps=(2, 4, 8), replicas=(1, 2))
    answer = answer_capacity(_workload(), question, model="meta-llama/Llama-3.1-8B", current=None, time_limit_s=0.0)
    assert not answer.complete
    assert answer.evaluated + answer.pruned == 1  # the first configuration decided, then the limit
    assert answer.configurations == 12


def test_questions_past_the_bounds_or_traffic_too_thin_are_refused() -> None:
    model = "meta-llama/Llama-3.1-8B"
    wide = CapacityQuestion(
        instances=tuple(c.name for c in instance_choices())[:5], tps=(1, 2, 4, 8, 16), replicas=(1, 2)
    )
    assert wide.size > MAX_CONFIGURATIONS
    with pytest.raises(CapacityError, match=f"searches {MAX_CONFIGURATIONS} at most"):
        answer_capacity(_workload(), wide, model=model, current=None)
    with pytest.raises(CapacityError, match="too little traffic"):
        answer_capacity(_workload(1), CapacityQuestion(("trn2.48xlarge",), (8,)), model=model, current=None)
    with pytest.raises(CapacityError, match="no configuration of the space can run"):
        answer_capacity(_workload(), CapacityQuestion(("p5.48xlarge",), (64,)), model=model, current=None)


async def test_the_search_runs_off_the_event_loop_one_at_a_time() -> None:
    question = CapacityQuestion(instances=("trn2.48xlarge", "p5.48xlarge"), tps=(2, 4, 8), replicas=(1, 2))
    first = asyncio.create_task(
        run_capacity_search(_workload(120), question, model="meta-llama/Llama-3.1-8B", current=None)
    )
    await asyncio.sleep(0)  # the first search has taken the search thread
    with pytest.raises(CapacitySearchBusy):
        await run_capacity_search(_workload(), question, model="meta-llama/Llama-3.1-8B", current=None)
    turns = 0
    while not first.done():  # the loop keeps turning while the search runs
        turns += 1
        await asyncio.sleep(0.01)
    assert turns > 1
    assert first.result().complete
    again = await run_capacity_search(
        _workload(), CapacityQuestion(("trn2.48xlarge",), (8,), (1,)), model="meta-llama/Llama-3.1-8B", current=None
    )
    assert again.evaluated == 1  # the thread is free again once the first has finished
