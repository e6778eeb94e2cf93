"""`simulate bench`: closed- and open-loop benchmarks on the engine, measured as serving benchmarks measure them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.bench import (
    closed_loop,
    open_loop,
    open_loop_arrivals,
    simulate_bench,
)
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.costmodel import Coefficients, PhaseCoefficients
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.point import simulate_point
from switchyard.accelerator.sim.requests import FinishedRequest

MODEL, INSTANCE, TP = "meta-llama/Meta-Llama-3-8B", "trn1.32xlarge", 8
IN, OUT = 512, 64
ARGS = ["--model", MODEL, "--instance", INSTANCE, "--tp", str(TP), "--input-len", str(IN), "--output-len", str(OUT)]


def _cluster() -> Cluster:
    return Cluster(make_deployment(MODEL, INSTANCE, TP), 1)


def _max_in_flight(finished: list[FinishedRequest]) -> int:
    """Most requests sent and not yet finished at any arrival (a request finishing at t is gone at t)."""
    return max(sum(1 for f in finished if f.arrival_s <= a < f.finish_s) for a in (g.arrival_s for g in finished))


def test_closed_loop_keeps_exactly_the_concurrency_in_flight_and_sends_every_request() -> None:
    finished = closed_loop(_cluster(), 5, 30, IN, OUT)
    assert sorted(f.request_id for f in finished) == list(range(30))
    assert _max_in_flight(finished) == 5
    starts = sorted(f.arrival_s for f in finished)
    ends = sorted(f.finish_s for f in finished)
    assert starts[5:] == pytest.approx(ends[:25])  # each later request is sent when one finishes


def test_at_concurrency_one_the_latencies_match_the_static_batch_of_one() -> None:
    point = simulate_point(MODEL, INSTANCE, TP, 1, IN, OUT)
    r = simulate_bench(MODEL, INSTANCE, TP, concurrency=1, requests=6, input_len=IN, output_len=OUT)
    assert r.ttft_ms["p50"] == pytest.approx(point.ttft_ms, rel=0.02)
    assert r.itl_ms["p50"] == pytest.approx(point.tpot_ms, rel=0.05)
    assert r.e2e_ms["p50"] == pytest.approx(point.e2e_ms, rel=0.02)
    assert r.e2e_ms["p50"] == pytest.approx(r.ttft_ms["p50"] + (OUT - 1) * r.itl_ms["p50"], rel=0.01)


def test_given_coefficients_replace_the_committed_calibration_as_in_point_mode() -> None:
    committed = simulate_bench(MODEL, INSTANCE, TP, concurrency=1, requests=6, input_len=IN, output_len=OUT)
    slow = Coefficients(
        prefill=replace(PhaseCoefficients(), step_overhead_s=0.5),
        decode=replace(PhaseCoefficients(), step_overhead_s=0.1),
    )
    r = simulate_bench(MODEL, INSTANCE, TP, concurrency=1, requests=6, input_len=IN, output_len=OUT, coefficients=slow)
    point = simulate_point(MODEL, INSTANCE, TP, 1, IN, OUT, coefficients=slow)
    assert (committed.coefficients_group, r.coefficients_group) == ("trn1", "custom")
    assert r.ttft_ms["p50"] == pytest.approx(point.ttft_ms, rel=0.02)
    assert r.itl_ms["p50"] == pytest.approx(point.tpot_ms, rel=0.05)
    assert r.itl_ms["p50"] > 100.0 > committed.itl_ms["p50"]  # every decode step pays the 100 ms given


def test_ttft_and_throughput_grow_with_concurrency_but_stay_below_c_streams_at_batch_one_speed() -> None:
    tpot_one_ms = simulate_point(MODEL, INSTANCE, TP, 1, IN, OUT).tpot_ms
    runs = {
        c: simulate_bench(MODEL, INSTANCE, TP, concurrency=c, requests=4 * c, input_len=IN, output_len=OUT)
        for c in (1, 4, 16)
    }
    ttft = [runs[c].ttft_ms["p90"] for c in (1, 4, 16)]
    tok_s = [runs[c].output_tokens_per_s for c in (1, 4, 16)]
    assert ttft == sorted(ttft)
    assert ttft[0] < ttft[2] / 2
    assert tok_s == sorted(tok_s)
    assert tok_s[2] > 4 * tok_s[0]
    for c, r in runs.items():
        assert r.output_tokens_per_s < c * 1e3 / tpot_one_ms


def test_open_loop_at_a_low_rate_does_not_queue() -> None:
    alone_ms = simulate_point(MODEL, INSTANCE, TP, 1, IN, OUT).ttft_ms
    r = simulate_bench(MODEL, INSTANCE, TP, rate_per_s=0.05, requests=20, input_len=IN, output_len=OUT)
    assert r.ttft_ms["p99"] == pytest.approx(alone_ms, rel=0.02)
    assert r.requests_per_s == pytest.approx(0.05, rel=0.5)


def test_open_loop_far_above_capacity_makes_each_later_request_wait_longer() -> None:
    arrivals = open_loop_arrivals(200.0, 120, poisson=False)
    finished = sorted(open_loop(_cluster(), arrivals, IN, OUT), key=lambda f: f.request_id)
    ttft = [f.ttft_ms for f in finished]
    first, last = sum(ttft[:20]) / 20, sum(ttft[-20:]) / 20
    assert last > 5 * first
    assert _max_in_flight(finished) > 100  # everything was sent long before it could be served


def test_open_loop_arrivals_are_seeded_poisson_or_evenly_spaced() -> None:
    poisson = open_loop_arrivals(4.0, 2000, seed=7)
    assert poisson == open_loop_arrivals(4.0, 2000, seed=7) != open_loop_arrivals(4.0, 2000, seed=8)
    assert poisson[0] == 0.0
    assert poisson == sorted(poisson)
    assert len(poisson) / poisson[-1] == pytest.approx(4.0, rel=0.1)
    assert open_loop_arrivals(4.0, 3, poisson=False) == [0.0, 0.25, 0.5]


def test_warmup_leaves_the_first_finished_requests_out() -> None:
    default = simulate_bench(MODEL, INSTANCE, TP, concurrency=4, requests=12, input_len=IN, output_len=OUT)
    assert (default.warmup, default.measured) == (4, 8)
    none = simulate_bench(MODEL, INSTANCE, TP, concurrency=4, requests=12, input_len=IN, output_len=OUT, warmup=0)
    assert none.measured == 12
    with pytest.raises(ConfigurationError, match="warmup"):
        simulate_bench(MODEL, INSTANCE, TP, concurrency=4, requests=12, input_len=IN, output_len=OUT, warmup=12)


def test_an_fp8_kv_cache_holds_twice_the_tokens_and_reports_its_dtype() -> None:
    bf16 = make_deployment(MODEL, INSTANCE, TP)
    fp8 = make_deployment(MODEL, INSTANCE, TP, kv_dtype="fp8")
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token / 2
    assert fp8.kv_capacity_tokens in (2 * bf16.kv_capacity_tokens, 2 * bf16.kv_capacity_tokens + 1)
    r = simulate_bench(MODEL, INSTANCE, TP, concurrency=1, requests=2, input_len=IN, output_len=OUT, kv_dtype="fp8")
    assert r.kv_dtype == "fp8"


def test_expert_parallelism_places_a_mixture_of_experts_models_experts_whole_on_the_ranks() -> None:
    moe, args = "Qwen/Qwen3-30B-A3B", {"concurrency": 4, "requests": 12, "input_len": IN, "output_len": OUT}
    tp = simulate_bench(moe, "trn2.48xlarge", 8, **args)  # type: ignore[arg-type]
    ep = simulate_bench(moe, "trn2.48xlarge", 8, expert_parallel=True, **args)  # type: ignore[arg-type]
    assert (tp.expert_parallel, ep.expert_parallel) == (False, True)
    assert ep.itl_ms != tp.itl_ms  # whole experts and two all-to-alls a layer cost otherwise than TP slices
    with pytest.raises(ConfigurationError, match="mixture-of-experts"):
        simulate_bench(MODEL, INSTANCE, TP, expert_parallel=True, **args)  # type: ignore[arg-type]
    result = CliRunner().invoke(
        simulate,
        [
            *("bench", "--model", moe, "--instance", "trn2.48xlarge", "--tp", "8", "--input-len", str(IN)),
            *("--output-len", str(OUT), "--concurrency", "2", "--requests", "4", "--parallelism", "ep", "--json", "-"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["expert_parallel"] is True


def test_the_cli_writes_the_documented_json_keys(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(simulate, ["bench", *ARGS, "--concurrency", "2", "--requests", "6", "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert {"ttft_ms", "itl_ms", "e2e_ms", "output_tokens_per_s", "requests_per_s", "measured", "warmup"} <= set(data)
    assert set(data["itl_ms"]) == {"p50", "p90", "p99"}
    assert (data["concurrency"], data["rate_per_s"], data["measured"]) == (2, None, 4)
    stdout = CliRunner().invoke(simulate, ["bench", *ARGS, "--rate", "1", "--requests", "3", "--json", "-"])
    assert stdout.exit_code == 0, stdout.output
    assert json.loads(stdout.output)["arrivals"] == "poisson"


def test_the_cli_prints_a_table_without_json() -> None:
    result = CliRunner().invoke(simulate, ["bench", *ARGS, "--concurrency", "2", "--requests", "4"])
    assert result.exit_code == 0, result.output
    assert "concurrency 2" in result.output
    assert "TTFT" in result.output
    assert "output tok/s" in result.output


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--concurrency", "2", "--rate", "1", "--requests", "4"], "--concurrency"),
        (["--requests", "4"], "--rate"),
        (["--concurrency", "2", "--requests", "0"], "--requests"),
        (["--concurrency", "0", "--requests", "4"], "--concurrency"),
        (["--concurrency", "2", "--requests", "4", "--warmup", "4"], "--warmup"),
    ],
)
def test_bad_options_exit_non_zero_naming_the_option(extra: list[str], named: str) -> None:
    result = CliRunner().invoke(simulate, ["bench", *ARGS, *extra])
    assert result.exit_code != 0
    assert named in result.output
