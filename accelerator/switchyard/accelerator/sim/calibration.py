"""Calibrate the cost model on published measurements: fit every group, then report in-sample and cross-validated
errors (leave one model out) per group, and write the coefficients file calibration_data loads.

The rows are read by benchmark_rows.py; which rows fit which coefficients is group_fit.py; the least squares of one
phase is phase_fit.py. Their public names are importable from here too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from switchyard.accelerator.sim.benchmark_rows import BenchmarkRow, RowError, architecture, read_benchmarks
from switchyard.accelerator.sim.calibration_data import POOLED_GROUP, newest_stack
from switchyard.accelerator.sim.costmodel import COEFFICIENT_NAMES, Coefficients, FloatArray
from switchyard.accelerator.sim.group_fit import (
    GPU_FIT_CHIPS,
    GPU_STACK_SCOPED,
    MIN_ARCHITECTURES,
    NEW_STACK_SOFTWARE,
    NEW_STACK_TIED,
    SERVING_FREE,
    STACK_SCOPED,
    fit_all,
    fit_coefficients,
    fit_generation,
    fit_new_stack,
    fit_stacks,
    hardware_parents,
    serving_generations,
    with_software,
)
from switchyard.accelerator.sim.hardware import get_instance
from switchyard.accelerator.sim.phase_fit import LOWER_BOUNDS, row_features

__all__ = [
    "GPU_FIT_CHIPS",
    "GPU_STACK_SCOPED",
    "LOWER_BOUNDS",
    "MIN_ARCHITECTURES",
    "NEW_STACK_SOFTWARE",
    "NEW_STACK_TIED",
    "REPORT_GROUPS",
    "SERVING_FREE",
    "STACK_SCOPED",
    "BenchmarkRow",
    "CalibrationResult",
    "RowError",
    "architecture",
    "calibrate",
    "fit_coefficients",
    "fit_generation",
    "predict_rows",
    "read_benchmarks",
    "write_result",
]


def predict_rows(rows: Sequence[BenchmarkRow], coeffs: Coefficients) -> list[RowError]:
    """Each row's TTFT and TPOT as `coeffs` predict them."""
    cp, cd = coeffs.prefill.as_array(), coeffs.decode.as_array()
    out = []
    for row in rows:
        ttft, tpot = row_features(row)
        out.append(RowError(row, float(cp @ ttft) * 1e3, float(cd @ tpot) * 1e3))
    return out


def _abs_pct(values: Sequence[float]) -> FloatArray:
    a: FloatArray = np.abs(np.array(values, dtype=np.float64)) * 100
    out: FloatArray = a[np.isfinite(a)]
    return out


def _summary(errors: Sequence[RowError]) -> dict[str, float]:
    t = _abs_pct([e.ttft_err for e in errors])
    p = _abs_pct([e.tpot_err for e in errors])

    def q(a: FloatArray, pct: float) -> float:
        return float(np.percentile(a, pct)) if a.size else float("nan")

    return {
        "rows": float(len(errors)),
        "ttft_rows": float(t.size),
        "tpot_rows": float(p.size),
        "ttft_median_abs_pct": q(t, 50),
        "ttft_p90_abs_pct": q(t, 90),
        "tpot_median_abs_pct": q(p, 50),
        "tpot_p90_abs_pct": q(p, 90),
    }


def _chip(row: BenchmarkRow) -> str:
    return get_instance(row.instance).chip.name


# Groups of rows errors are reported for: hardware as people buy it (the stacks inside a group differ).
REPORT_GROUPS: dict[str, str] = {"trn1": "Trainium1", "inf2": "Inferentia2", "trn2": "Trainium2", "gpu": "GPU"}


@dataclass(frozen=True, slots=True)
class CalibrationResult:
    """Coefficients per group, in-sample errors and leave-one-model-out cross-validation errors."""

    coefficients: dict[str, Coefficients]
    in_sample: list[RowError]
    cross_validation: list[RowError]

    def summary(self) -> dict[str, dict[str, float]]:
        return {"in_sample": _summary(self.in_sample), "leave_one_model_out": _summary(self.cross_validation)}

    def summary_by_group(self) -> dict[str, dict[str, dict[str, float]]]:
        """Errors per reporting group (Trainium1, Inferentia2, Trainium2, GPU), then per stack or GPU chip within.

        GPU rows on chips outside GPU_FIT_CHIPS (H100) are never fitted: their "in_sample" errors are
        predictions by transfer from the A100 fit.
        """
        out: dict[str, dict[str, dict[str, float]]] = {}
        rows = [e.row for e in self.in_sample]
        for gen in dict.fromkeys(sorted(r.generation for r in rows)):
            label = REPORT_GROUPS.get(gen, gen)
            subsets: list[tuple[str, str, str | None]] = [(label, "", None)]  # (name, by, value)
            stacks = sorted({r.stack for r in rows if r.generation == gen})
            chips = sorted({_chip(r) for r in rows if r.generation == gen})
            if len(stacks) > 1:
                subsets += [(f"{label} / {st}", "stack", st) for st in stacks]
            if len(chips) > 1:
                subsets += [(f"{label} / {c}", "chip", c) for c in chips]
            for name, by, value in subsets:

                def pick(r: BenchmarkRow, gen: str = gen, by: str = by, value: str | None = value) -> bool:
                    return r.generation == gen and (not by or (r.stack if by == "stack" else _chip(r)) == value)

                out[name] = {
                    "in_sample": _summary([e for e in self.in_sample if pick(e.row)]),
                    "leave_one_model_out": _summary([e for e in self.cross_validation if pick(e.row)]),
                }
        return out

    def to_json(self, data_source: str) -> dict[str, Any]:
        groups = {}
        for g, c in self.coefficients.items():
            groups[g] = {
                phase: {k: getattr(pc, k) for k in COEFFICIENT_NAMES} | {"as_quoted": pc.describe()}
                for phase, pc in (("prefill", c.prefill), ("decode", c.decode))
            }
        return {
            "_about": "Output of `python -m switchyard.accelerator calibrate`; do not edit by hand.",
            "data": data_source,
            "fitted_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "stack_scoped": list(STACK_SCOPED),
            "new_stack_software": {k: list(v) for k, v in NEW_STACK_SOFTWARE.items()},
            "groups": groups,
            "errors": self.summary(),
            "errors_by_group": self.summary_by_group(),
        }


def _cross_validate(rows: Sequence[BenchmarkRow], fitted: dict[str, Coefficients]) -> list[RowError]:
    """Leave one model out of the fit its rows belong to, refit, and predict its rows."""
    cv: list[RowError] = []
    serving = [r for r in rows if r.new_stack and r.per_generation]
    own_fit = serving_generations(rows)
    parents = hardware_parents(fitted, fitted.get(POOLED_GROUP, Coefficients()))
    for model in sorted({r.model for r in rows}):
        test = [r for r in rows if r.model == model]
        train = [r for r in rows if r.model != model]
        nxd: dict[str, Coefficients] = {}  # generation -> NxD Inference set that never saw the model
        for r in test:
            # The fit unit of the row: its generation's rows for transformers-neuronx and GPU engines, every
            # generation's NxD Inference rows (on the full hardware fit) for the new stack, then, where its
            # generation has its own serving fit, that generation's serving rows of the other architectures.
            if r.new_stack:
                unit = [t for t in train if t.new_stack and not t.per_generation]
                if not unit:
                    continue
                if r.generation not in nxd:
                    coeffs = with_software(parents[r.generation], fit_new_stack(unit, parents))
                    if r.generation in own_fit:
                        arch = architecture(model)
                        own = [t for t in serving if t.generation == r.generation and architecture(t.model) != arch]
                        coeffs = fit_generation(own, coeffs)
                    nxd[r.generation] = coeffs
                coeffs = nxd[r.generation]
            else:
                unit = [t for t in train if t.generation == r.generation and not t.new_stack]
                if gpu_row := not get_instance(r.instance).chip.static_shapes:
                    unit = [t for t in unit if get_instance(t.instance).chip.name in GPU_FIT_CHIPS]
                if not unit:
                    continue
                stacks = fit_stacks(unit, GPU_STACK_SCOPED if gpu_row else STACK_SCOPED)
                coeffs = stacks.get(r.stack) or stacks[newest_stack(stacks)]
            cv += predict_rows([r], coeffs)
    return cv


def calibrate(rows: Sequence[BenchmarkRow]) -> CalibrationResult:
    """Fit coefficients per generation/stack plus a pooled set; evaluate leave-one-model-out.

    The pooled set fits every transformers-neuronx row as one generation and keeps the newest stack's
    coefficients: it is the hardware prior of Neuron generations without transformers-neuronx measurements
    (Trainium2/3) and what the wafer-scale CS-3 uses. Cross-validation refits without one model and predicts
    that model's rows (with the newest remaining stack if the model was the only one measured on its stack).
    """
    coeffs = fit_all(rows)
    in_sample = []
    for g in sorted({r.group for r in rows}):
        in_sample += predict_rows([r for r in rows if r.group == g], coeffs[g])
    return CalibrationResult(coeffs, in_sample, _cross_validate(rows, coeffs))


def write_result(result: CalibrationResult, out: str | Path, data_source: str) -> None:
    """Write the coefficients file that calibration_data loads."""
    Path(out).write_text(json.dumps(result.to_json(data_source), indent=2) + "\n", encoding="utf-8")
