"""Fit the cost model's efficiency coefficients to published measurements; report errors and CV."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from switchyard.accelerator.calibration_data import POOLED_GROUP
from switchyard.accelerator.costmodel import COEFFICIENT_NAMES, Coefficients, FloatArray, PhaseCoefficients
from switchyard.accelerator.deployment import make_deployment
from switchyard.accelerator.fitting import bounded_lstsq
from switchyard.accelerator.hardware import get_instance
from switchyard.accelerator.point import point_features

__all__ = [
    "LOWER_BOUNDS",
    "BenchmarkRow",
    "CalibrationResult",
    "RowError",
    "calibrate",
    "fit_coefficients",
    "read_benchmarks",
    "write_result",
]

# Physical floors: utilisations cannot exceed 100 %, overheads cannot be negative, and collectives
# cannot run faster than a quarter of the catalog's ideal latency (leaves room for catalog error).
LOWER_BOUNDS = np.array([1.0, 1.0, 1.0, 0.25, 0.0, 0.0])


@dataclass(frozen=True, slots=True)
class BenchmarkRow:
    """One published measurement (a row of neuron_benchmarks.csv)."""

    model: str
    instance: str
    tp: int
    batch: int
    input_len: int
    output_len: int
    weights: str
    ttft_ms: float
    tpot_ms: float

    @property
    def group(self) -> str:
        return get_instance(self.instance).calibration_group


@dataclass(frozen=True, slots=True)
class RowError:
    row: BenchmarkRow
    ttft_pred_ms: float
    tpot_pred_ms: float

    @property
    def ttft_err(self) -> float:
        return (self.ttft_pred_ms - self.row.ttft_ms) / self.row.ttft_ms

    @property
    def tpot_err(self) -> float:
        return (self.tpot_pred_ms - self.row.tpot_ms) / self.row.tpot_ms


def read_benchmarks(path: str | Path) -> list[BenchmarkRow]:
    """Rows of a benchmark CSV with the columns of ../shared/data/neuron_benchmarks.csv."""
    with Path(path).open(newline="", encoding="utf-8") as fh:
        return [
            BenchmarkRow(
                model=r["model"],
                instance=r["instance"],
                tp=int(r["tp"]),
                batch=int(r["batch"]),
                input_len=int(r["input_len"]),
                output_len=int(r["output_len"]),
                weights=r["weights"],
                ttft_ms=float(r["ttft_p50_ms"]),
                tpot_ms=float(r["tpot_p50_ms"]),
            )
            for r in csv.DictReader(fh)
        ]


def _features(row: BenchmarkRow) -> tuple[FloatArray, FloatArray]:
    dep = make_deployment(row.model, row.instance, row.tp, row.weights)
    ttft, median, _ = point_features(dep, row.batch, row.input_len, row.output_len)
    return ttft, median


def fit_coefficients(rows: Sequence[BenchmarkRow]) -> Coefficients:
    """Coefficients minimising squared relative error: prefill from TTFT, decode from TPOT."""
    feats = [_features(row) for row in rows]
    ones = np.ones(len(rows))
    a_prefill = np.array([f[0] * 1e3 / row.ttft_ms for f, row in zip(feats, rows, strict=True)])
    a_decode = np.array([f[1] * 1e3 / row.tpot_ms for f, row in zip(feats, rows, strict=True)])
    return Coefficients(
        prefill=PhaseCoefficients.from_array(bounded_lstsq(a_prefill, ones, LOWER_BOUNDS)),
        decode=PhaseCoefficients.from_array(bounded_lstsq(a_decode, ones, LOWER_BOUNDS)),
    )


def _predict(rows: Sequence[BenchmarkRow], coeffs: Coefficients) -> list[RowError]:
    cp, cd = coeffs.prefill.as_array(), coeffs.decode.as_array()
    out = []
    for row in rows:
        ttft, tpot = _features(row)
        out.append(RowError(row, float(cp @ ttft) * 1e3, float(cd @ tpot) * 1e3))
    return out


def _summary(errors: Sequence[RowError]) -> dict[str, float]:
    t = np.abs([e.ttft_err for e in errors]) * 100
    p = np.abs([e.tpot_err for e in errors]) * 100
    return {
        "rows": float(len(errors)),
        "ttft_median_abs_pct": float(np.median(t)),
        "ttft_p90_abs_pct": float(np.percentile(t, 90)),
        "tpot_median_abs_pct": float(np.median(p)),
        "tpot_p90_abs_pct": float(np.percentile(p, 90)),
    }


@dataclass(frozen=True, slots=True)
class CalibrationResult:
    """Coefficients per group, in-sample errors and leave-one-model-out cross-validation errors."""

    coefficients: dict[str, Coefficients]
    in_sample: list[RowError]
    cross_validation: list[RowError]

    def summary(self) -> dict[str, dict[str, float]]:
        return {"in_sample": _summary(self.in_sample), "leave_one_model_out": _summary(self.cross_validation)}

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
            "groups": groups,
            "errors": self.summary(),
        }


def calibrate(rows: Sequence[BenchmarkRow]) -> CalibrationResult:
    """Fit one coefficient set per calibration group plus a pooled set; evaluate leave-one-model-out."""
    groups = sorted({r.group for r in rows})
    coeffs = {g: fit_coefficients([r for r in rows if r.group == g]) for g in groups}
    coeffs[POOLED_GROUP] = fit_coefficients(rows)
    in_sample = [e for g in groups for e in _predict([r for r in rows if r.group == g], coeffs[g])]
    cv: list[RowError] = []
    for model in sorted({r.model for r in rows}):
        for g in groups:
            train = [r for r in rows if r.group == g and r.model != model]
            test = [r for r in rows if r.group == g and r.model == model]
            if test and train:
                cv += _predict(test, fit_coefficients(train))
    return CalibrationResult(coeffs, in_sample, cv)


def write_result(result: CalibrationResult, out: str | Path, data_source: str) -> None:
    """Write the coefficients file that calibration_data loads."""
    Path(out).write_text(json.dumps(result.to_json(data_source), indent=2) + "\n", encoding="utf-8")
