"""How prefill time extrapolates from short to long prompts (issue 16; docs/simulator.md, "Long prompts on
Trainium2"): physical properties of the committed model, and the evidence in the published rows that keeps an
efficiency growing with prompt length out of it (benchmarks/calibration_errors.py --prefill-extrapolation)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from switchyard.accelerator.sim.calibration import BenchmarkRow, read_benchmarks
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.costmodel import COEFFICIENT_NAMES, PhaseCoefficients
from switchyard.accelerator.sim.hardware import get_instance
from switchyard.accelerator.sim.phase_fit import fit_phase

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TABLES = ("neuron_benchmarks.csv", "neuron_benchmarks_2025.csv", "gpu_benchmarks.csv")


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calibration_errors", BENCHMARKS / "calibration_errors.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rows() -> list[BenchmarkRow]:
    return read_benchmarks(*(BENCHMARKS / "data" / t for t in TABLES))


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct"])
def test_a_longer_prompt_never_uses_less_of_the_chip(script: ModuleType, model: str) -> None:
    """Per-pass costs are amortised over more tokens, so the share of peak the padded work reaches cannot fall."""
    _group, coeffs = coefficients_for(get_instance("trn2.48xlarge"))
    shares = [
        script.prefill_fraction_of_peak(coeffs.prefill, model, n)["padded_fraction"]
        for n in (128, 512, 1500, 4096, 10_000, 16_384)
    ]
    assert shares == sorted(shares)
    assert all(0 < s <= 1 for s in shares)


def test_padding_to_the_bucket_is_work_the_prompt_does_not_use(script: ModuleType) -> None:
    """10,000 tokens run in the 16,384 bucket: the useful share of peak is below the padded one by at least the
    matmul padding (10,000 / 16,384), and the prefill costs what the full bucket costs."""
    _group, coeffs = coefficients_for(get_instance("trn2.48xlarge"))
    model = "meta-llama/Llama-3.3-70B-Instruct"
    ten_k = script.prefill_fraction_of_peak(coeffs.prefill, model, 10_000)
    bucket = script.prefill_fraction_of_peak(coeffs.prefill, model, 16_384)
    assert ten_k["ttft_ms"] == pytest.approx(bucket["ttft_ms"])
    assert ten_k["useful_fraction"] < ten_k["padded_fraction"] * 10_000 / 16_384


def test_the_2024_rows_reject_an_efficiency_that_grows_with_the_tokens_of_a_pass(
    script: ModuleType, rows: list[BenchmarkRow]
) -> None:
    """MFU(n) = MFU_max n / (n + n_half) fitted on 54 rows of 128-8,192 tokens and batch 1-8: even n_half = 256
    tokens doubles the errors (measured in sample: median 9.9 -> 17.9 %, p90 24.9 -> 48.8 %), so the model keeps
    one efficiency per pass size. If new rows support a growing efficiency, this fails: revisit issue 16."""
    flat = script.saturating_mfu_check(rows, 0)
    growing = script.saturating_mfu_check(rows, 256)
    assert growing["ttft_median"] > 1.5 * flat["ttft_median"]
    assert growing["ttft_p90"] > 1.5 * flat["ttft_p90"]


def test_holding_the_new_stack_at_the_old_stacks_mfu_needs_milliseconds_per_layer(
    script: ModuleType, rows: list[BenchmarkRow]
) -> None:
    """Candidate (a) of issue 16: with the 2024 MFU the NxD Inference rows need a per-layer cost of milliseconds
    (measured 5.3 ms, against 275 µs fitted), which no kernel launch or synchronisation costs, and fit worse."""
    fitted = script.nxd_prefill_variant(rows, "fitted")
    held = script.nxd_prefill_variant(rows, "old-stack MFU")
    assert held["trn2_dense"]["layer_overhead_us"] > 1000
    for gen in ("trn1", "trn2"):
        assert held["errors"][gen]["in_sample"][0] > fitted["errors"][gen]["in_sample"][0] + 5


def test_a_coefficient_taken_from_the_parent_set_charges_the_columns_tied_to_it() -> None:
    """With the matmul efficiency inherited (not fitted) and attention tied to it, the parent's efficiency must
    multiply the attention FLOPs too, or the free coefficients absorb the attention time."""
    rng = np.random.default_rng(1)
    parent = PhaseCoefficients(inv_mfu=5.0, inv_mfu_attention=9.0, layer_overhead_s=0.0, step_overhead_s=0.0)
    layer_s = 2e-4
    feats = [rng.random(len(COEFFICIENT_NAMES)) * np.array([1, 1, 1, 1, 80, 1, 1, 0, 0]) * 0.01 for _ in range(6)]
    truth = parent.as_array().copy()
    truth[COEFFICIENT_NAMES.index("inv_mfu_attention")] = parent.inv_mfu
    truth[COEFFICIENT_NAMES.index("layer_overhead_s")] = layer_s
    measured_ms = [float(truth @ f) * 1e3 for f in feats]
    fitted = fit_phase(
        feats,
        measured_ms,
        ["s"] * 6,
        ["s"],
        free=("layer_overhead_s",),
        tied={"inv_mfu_attention": "inv_mfu"},
        parents=[parent] * 6,
    )["s"]
    assert fitted.layer_overhead_s == pytest.approx(layer_s, rel=1e-6)
    assert fitted.inv_mfu_attention == parent.inv_mfu
