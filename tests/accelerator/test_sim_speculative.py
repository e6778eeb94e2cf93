"""Speculative decoding with a draft model, a deployment property: a target + draft id of the catalog resolves to the
target with its draft; each step is k decodes of the draft and one pass of the target over k + 1 tokens a sequence,
and it gains (1 - a^(k+1)) / (1 - a) tokens in expectation, for the acceptance rate a the deployment states."""

from __future__ import annotations

import csv
from dataclasses import replace

import numpy as np
import pytest

from benchmarks.bench_fidelity import DATA, Skipped, parse_row
from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.bench import simulate_bench
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.costmodel import bucket, forward_time_s
from switchyard.accelerator.sim.deployment import DEFAULT_ACCEPTANCE_RATE, Speculation, make_deployment
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.point import simulate_point
from switchyard.accelerator.sim.stepcost import StepCost

PAIR = "Qwen/Qwen3-32B (target) + Qwen/Qwen3-1.7B (draft)"
TARGET, DRAFT = "Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B"


def test_the_published_pair_resolves_to_the_target_with_its_draft() -> None:
    pair, target = get_model(PAIR), get_model(TARGET)
    assert (pair.name, pair.draft_model, pair.num_speculative_tokens) == (PAIR, DRAFT, 7)
    assert replace(pair, name=TARGET, source=target.source, draft_model="", num_speculative_tokens=0) == target
    assert get_model(DRAFT).vocab_size == target.vocab_size  # one tokenizer


@pytest.mark.parametrize(
    ("rate", "tokens", "expected"),
    [(0.0, 7, 1.0), (1.0, 7, 8.0), (0.5, 1, 1.5), (0.7, 7, (1 - 0.7**8) / 0.3)],
)
def test_a_step_gains_the_accepted_run_plus_the_targets_own_token(rate: float, tokens: int, expected: float) -> None:
    draft = make_deployment(DRAFT, "p5.48xlarge", 1)
    assert Speculation(draft, tokens, rate).tokens_per_step == pytest.approx(expected, rel=1e-12)


def test_the_draft_sits_beside_the_target_with_its_weights_and_kv_cache() -> None:
    dep, target = make_deployment(PAIR, "trn2.3xlarge", 4), make_deployment(TARGET, "trn2.3xlarge", 4)
    assert dep.speculation is not None
    assert target.speculation is None
    draft = dep.speculation.draft
    assert (draft.model.name, draft.tp, dep.speculation.tokens) == (DRAFT, 4, 7)
    assert dep.speculation.acceptance_rate == DEFAULT_ACCEPTANCE_RATE
    assert dep.weight_bytes == target.weight_bytes + draft.weight_bytes
    assert dep.always_weight_bytes == target.always_weight_bytes  # the target's pass reads its own weights only
    assert dep.kv_bytes_per_token == target.kv_bytes_per_token + draft.kv_bytes_per_token
    assert dep.kv_read_bytes_per_token == target.kv_read_bytes_per_token
    assert dep.kv_capacity_tokens < target.kv_capacity_tokens


@pytest.mark.parametrize(("instance", "tp"), [("trn2.3xlarge", 4), ("p5.48xlarge", 2)])
def test_a_decode_step_is_k_draft_decodes_and_one_verify_pass_per_expected_token(instance: str, tp: int) -> None:
    dep = make_deployment(PAIR, instance, tp, acceptance_rate=0.6)
    assert dep.speculation is not None
    draft, k, gained = dep.speculation.draft, 7, dep.speculation.tokens_per_step
    _, coeffs = coefficients_for(dep.instance)
    cost, c = StepCost(dep, coeffs), coeffs.decode
    contexts = [700, 1500, 2100]
    if dep.instance.chip.static_shapes:
        bb = float(bucket(3, 1)[()])

        def ctx(i: int) -> float:
            return float(bucket(max(contexts) + i)[()])

        drafting = sum(float(forward_time_s(draft, c, bb, bb * ctx(i), bb * ctx(i))) for i in range(k))
        verify = float(forward_time_s(dep, c, bb * (k + 1), bb * ctx(0) * (k + 1), bb * ctx(0), sequences=bb))
    else:
        drafting = sum(
            float(forward_time_s(draft, c, 3.0, sum(contexts) + 3 * i, sum(contexts) + 3 * i)) for i in range(k)
        )
        verify = float(forward_time_s(dep, c, 3.0 * (k + 1), (k + 1) * sum(contexts), sum(contexts), sequences=3.0))
    assert cost.iteration_s(0, 0.0, 0.0, contexts) == pytest.approx((drafting + verify) / gained, rel=1e-12)
    jump = cost.decode_jump_s(contexts, 50)
    singles = np.cumsum([cost.iteration_s(0, 0.0, 0.0, [x + j for x in contexts]) for j in range(50)])
    np.testing.assert_allclose(jump, singles, rtol=1e-12)
    # the draft encodes the prompt chunks too
    plain = StepCost(make_deployment(TARGET, instance, tp), coeffs)
    prefill = cost.iteration_s(900, 900.0 * 900, 0.0, [], 1)
    assert prefill == pytest.approx(
        plain.iteration_s(900, 900.0 * 900, 0.0, [], 1)
        + StepCost(draft, coeffs).iteration_s(900, 900.0 * 900, 0.0, [], 1),
        rel=1e-12,
    )


def test_speculation_pays_off_with_a_high_acceptance_rate_and_costs_with_none() -> None:
    def tpot_ms(model: str, rate: float | None = None) -> float:
        return simulate_point(model, "trn2.3xlarge", 4, 1, 128, 512, acceptance_rate=rate).tpot_ms

    plain = tpot_ms(TARGET)
    assert tpot_ms(PAIR, 0.0) > plain  # every step drafts 7 tokens for nothing
    assert tpot_ms(PAIR, 0.9) < tpot_ms(PAIR, 0.7) < tpot_ms(PAIR, 0.5)
    assert tpot_ms(PAIR, 0.9) < plain
    pair, target = (simulate_point(m, "trn2.3xlarge", 4, 1, 128, 512) for m in (PAIR, TARGET))
    draft = simulate_point(DRAFT, "trn2.3xlarge", 4, 1, 128, 512)
    assert pair.ttft_ms == pytest.approx(target.ttft_ms + draft.ttft_ms, rel=1e-9)  # both encode the prompt


def test_the_engine_serves_the_pair_faster_per_token_the_more_drafts_it_accepts() -> None:
    def itl_ms(rate: float) -> float:
        b = simulate_bench(
            PAIR, "trn2.3xlarge", 4, requests=6, input_len=256, output_len=64, concurrency=2, acceptance_rate=rate
        )
        return b.itl_ms["p50"]

    assert itl_ms(0.9) < itl_ms(0.5) < itl_ms(0.0)


def test_speculation_that_cannot_be_modelled_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="acceptance rate"):
        make_deployment(PAIR, "trn2.3xlarge", 4, acceptance_rate=1.5)
    with pytest.raises(ConfigurationError, match="no draft"):
        make_deployment(TARGET, "trn2.3xlarge", 4, acceptance_rate=0.7)
    other_vocab = replace(get_model(TARGET), draft_model="meta-llama/Llama-3.1-8B", num_speculative_tokens=3)
    with pytest.raises(ConfigurationError, match="vocabulary"):
        make_deployment(other_vocab, "trn2.3xlarge", 4)


def test_the_pairs_published_row_stays_out_of_every_fidelity_group() -> None:
    # a secondary summary (Q=C) that names no instance type, TP or lengths: it resolves now, and is still skipped
    with (DATA / "neuron_benchmarks_unpinned_2026.csv").open(newline="", encoding="utf-8") as fh:
        row = next(r for r in csv.DictReader(fh) if r["model"] == PAIR)
    assert "[Q=C]" in row["notes"]
    parsed = parse_row(row, "pair", unpinned=True)
    assert isinstance(parsed, Skipped)
    assert parsed.reason == "instance not named"
    # had it named one, its speculative decoding (acceptance rate unpublished) would keep it out
    named = row | {"instance": "trn2.48xlarge", "tp": "64", "concurrency_or_static": "concurrency=1"}
    named |= {"input_len": "128", "output_len": "512"}
    parsed = parse_row(named, "pair", unpinned=True)
    assert isinstance(parsed, Skipped)
    assert parsed.reason == "speculative decoding"


def test_any_target_speculates_with_any_draft_of_its_vocabulary() -> None:
    stated = make_deployment(TARGET, "trn2.3xlarge", 4, draft_model=DRAFT, num_speculative_tokens=7)
    pair = make_deployment(PAIR, "trn2.3xlarge", 4)
    assert stated.speculation == pair.speculation
    assert (stated.weight_bytes, stated.kv_capacity_tokens) == (pair.weight_bytes, pair.kv_capacity_tokens)
    point = simulate_point(TARGET, "trn2.3xlarge", 4, 1, 128, 512, draft_model=DRAFT, num_speculative_tokens=7)
    assert point.tpot_ms == simulate_point(PAIR, "trn2.3xlarge", 4, 1, 128, 512).tpot_ms
    # a published alias drafts too, under its own name, and the draft may be a ModelConfig
    alias = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    big = make_deployment("Qwen/Qwen3-235B-A22B", "trn2.48xlarge", 64, draft_model=alias, num_speculative_tokens=3)
    assert big.speculation is not None
    assert (big.speculation.draft.model.name, big.speculation.tokens) == (alias, 3)
    own = make_deployment(TARGET, "trn2.3xlarge", 4, draft_model=get_model(DRAFT), num_speculative_tokens=7)
    assert own.speculation == pair.speculation


def test_stated_tokens_and_draft_replace_a_pairs_own() -> None:
    def speculation(**kw: object) -> tuple[str, int, float]:
        spec = make_deployment(PAIR, "trn2.3xlarge", 4, **kw).speculation  # type: ignore[arg-type]
        assert spec is not None
        return spec.draft.model.name, spec.tokens, spec.acceptance_rate

    assert speculation() == (DRAFT, 7, DEFAULT_ACCEPTANCE_RATE)
    assert speculation(num_speculative_tokens=3) == (DRAFT, 3, DEFAULT_ACCEPTANCE_RATE)
    assert speculation(draft_model="Qwen/Qwen3-8B") == ("Qwen/Qwen3-8B", 7, DEFAULT_ACCEPTANCE_RATE)
    assert speculation(acceptance_rate=0.25) == (DRAFT, 7, 0.25)
    three = simulate_point(PAIR, "trn2.3xlarge", 4, 1, 128, 512, num_speculative_tokens=3)
    stated = simulate_point(TARGET, "trn2.3xlarge", 4, 1, 128, 512, draft_model=DRAFT, num_speculative_tokens=3)
    assert three.tpot_ms == stated.tpot_ms != simulate_point(PAIR, "trn2.3xlarge", 4, 1, 128, 512).tpot_ms


def test_the_results_state_the_speculation_served() -> None:
    point = simulate_point(TARGET, "trn2.3xlarge", 4, 1, 128, 64, draft_model=DRAFT, num_speculative_tokens=5)
    assert point.to_dict()["speculation"] == {
        "draft_model": DRAFT,
        "num_speculative_tokens": 5,
        "acceptance_rate": DEFAULT_ACCEPTANCE_RATE,
    }
    assert simulate_point(TARGET, "trn2.3xlarge", 4, 1, 128, 64).speculation is None
    bench = simulate_bench(
        PAIR, "trn2.3xlarge", 4, requests=2, input_len=128, output_len=16, concurrency=1, acceptance_rate=0.4
    )
    assert bench.to_dict()["speculation"] == {"draft_model": DRAFT, "num_speculative_tokens": 7, "acceptance_rate": 0.4}


_WINDOWED_DRAFT = replace(get_model(DRAFT), name="acme/windowed-draft", sliding_window=4096)


@pytest.mark.parametrize(
    ("model", "kwargs", "problem"),
    [
        (TARGET, {"draft_model": "meta-llama/Llama-3.1-8B", "num_speculative_tokens": 4}, "vocabulary"),
        (TARGET, {"draft_model": _WINDOWED_DRAFT, "num_speculative_tokens": 4}, "attention window"),
        (TARGET, {"draft_model": DRAFT}, "num_speculative_tokens"),
        (TARGET, {"draft_model": DRAFT, "num_speculative_tokens": 0}, "at least one drafted token"),
        (PAIR, {"num_speculative_tokens": -1}, "at least one drafted token"),
        (TARGET, {"draft_model": DRAFT, "num_speculative_tokens": 33}, "at most 32 drafted tokens"),
        (TARGET, {"draft_model": DRAFT, "num_speculative_tokens": 3, "acceptance_rate": -0.1}, r"in \[0, 1\]"),
        (TARGET, {"draft_model": DRAFT, "num_speculative_tokens": 3, "acceptance_rate": float("nan")}, "nan"),
        (TARGET, {"num_speculative_tokens": 3}, "no draft model: speculative tokens"),
        (TARGET, {"draft_model": "Qwen/Qwen3-1.7X", "num_speculative_tokens": 3}, "unknown model"),
        (TARGET, {"draft_model": "Qwen/Qwen3-Embedding-8B", "num_speculative_tokens": 3}, "embedding model"),
        (TARGET, {"draft_model": PAIR, "num_speculative_tokens": 3}, "a draft of its own"),
    ],
)
def test_a_draft_that_cannot_be_modelled_is_refused_naming_the_problem(
    model: str, kwargs: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        make_deployment(model, "trn2.3xlarge", 4, **kwargs)  # type: ignore[arg-type]
