"""The per-generation refit of NxD Inference on serving rows, and its leave-one-architecture-out refits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from switchyard.accelerator.sim.calibration import BenchmarkRow, predict_rows
from switchyard.accelerator.sim.calibration_data import NXD_INFERENCE, load_coefficients
from switchyard.accelerator.sim.costmodel import Coefficients
from switchyard.accelerator.sim.serving_calibration import (
    MIN_ARCHITECTURES,
    SERVING_FREE,
    architecture,
    fit_generation,
    fit_serving,
)

SHAPES = [(1, 128, 128), (1, 2048, 512), (4, 512, 256)]  # (batch, prompt, output)
MODELS = [  # (model, instance, tp): dense models of three architectures on one generation (trn2), then MoE ones
    ("meta-llama/Llama-3.1-8B-Instruct", "trn2.3xlarge", 4),
    ("mistralai/Mistral-7B-Instruct-v0.3", "trn2.3xlarge", 4),
    ("mistralai/Ministral-3-14B-Instruct-2512", "trn2.3xlarge", 4),
    ("meta-llama/Llama-3.3-70B-Instruct", "trn2.48xlarge", 32),
    # batch 1 gathers 2 of 8 experts, batch 4 runs every expert; 4 of 128 experts at every shape
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "trn2.48xlarge", 8),
    ("mistralai/Mistral-Small-4-119B-2603", "trn2.48xlarge", 16),
]


def _truth() -> Coefficients:
    """The committed trn2 set with every SERVING_FREE coefficient moved: what synthetic rows are measured on."""
    committed = load_coefficients()[f"trn2/{NXD_INFERENCE}"]
    decode = replace(committed.decode, inv_mbu=1.4, inv_mfu_attention=3.0, layer_overhead_s=1e-4, step_overhead_s=2e-3)
    decode = replace(decode, expert_gather_inv_mbu=3.5)
    assert not SERVING_FREE["prefill"]  # prefill keeps the parent's set (group_fit.SERVING_FREE says why)
    return Coefficients(prefill=committed.prefill, decode=decode, moe_nxd=True)


def _rows(models: list[tuple[str, str, int]]) -> list[BenchmarkRow]:
    """Rows whose TTFT and TPOT are what _truth() predicts for them."""
    blank = [
        BenchmarkRow(m, inst, tp, b, i, o, "bf16", float("nan"), float("nan"), stack=NXD_INFERENCE)
        for m, inst, tp in models
        for b, i, o in SHAPES
    ]
    return [replace(e.row, ttft_ms=e.ttft_pred_ms, tpot_ms=e.tpot_pred_ms) for e in predict_rows(blank, _truth())]


def test_a_fit_on_rows_measured_with_known_coefficients_reproduces_them() -> None:
    rows = _rows(MODELS)
    fitted = fit_generation(rows, load_coefficients()[f"trn2/{NXD_INFERENCE}"])
    for e in predict_rows(rows, fitted):
        assert e.ttft_err == pytest.approx(0.0, abs=1e-6)
        assert e.tpot_err == pytest.approx(0.0, abs=1e-6)
    assert fitted.decode.inv_mbu == pytest.approx(1.4, rel=1e-4)  # a chip property the rows determine
    assert fitted.decode.expert_gather_inv_mbu == pytest.approx(3.5, rel=1e-4)  # what the MoE decodes add
    assert fitted.moe_nxd


def test_only_the_serving_coefficients_move_the_rest_stay_committed() -> None:
    committed = load_coefficients()[f"trn2/{NXD_INFERENCE}"]
    parent = replace(committed, prefill=replace(committed.prefill, inv_mfu=3.0, step_overhead_s=0.04))
    fitted = fit_generation(_rows(MODELS), parent)
    assert fitted.prefill == parent.prefill  # rows whose TTFT the parent does not predict leave prefill alone
    for name in ("collective_scale", "host_sampling_s_per_logit", "inv_mfu"):
        assert getattr(fitted.decode, name) == getattr(parent.decode, name)
    assert fitted.decode.inv_mbu == pytest.approx(1.4, rel=1e-4)


def test_each_architecture_has_a_refit_that_never_saw_it_and_aliases_count_as_their_base() -> None:
    models = [*MODELS, ("meta-llama/Meta-Llama-3.1-8B-Instruct", "trn2.3xlarge", 4)]  # an alias of the first one
    rows = _rows(models)
    fit = fit_serving(rows)
    assert architecture("meta-llama/Meta-Llama-3.1-8B-Instruct") == architecture("meta-llama/Llama-3.1-8B-Instruct")
    assert fit.architectures["trn2"] == frozenset(architecture(m) for m, _, _ in MODELS)
    parent = load_coefficients()[f"trn2/{NXD_INFERENCE}"]
    without_llama = [r for r in rows if architecture(r.model) != "meta-llama/Llama-3.1-8B"]
    expected = fit_generation(without_llama, parent)
    assert fit.for_row("trn2", "meta-llama/Meta-Llama-3.1-8B-Instruct") == expected
    # a model the fit never saw gets the full fit; a generation that was not fitted gets nothing
    assert fit.for_row("trn2", "Qwen/Qwen3-8B") == fit.coefficients["trn2"]
    assert fit.for_row("inf2", "meta-llama/Llama-3.1-8B-Instruct") is None


def test_a_generation_with_too_few_architectures_is_not_fitted() -> None:
    rows = _rows(MODELS[: MIN_ARCHITECTURES - 1])
    fit = fit_serving(rows)
    assert fit.unfitted == frozenset({"trn2"})
    assert fit.coefficients == {}
    assert fit.for_row("trn2", MODELS[0][0]) is None
