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

from switchyard.accelerator.calibration_data import POOLED_GROUP, group_name, newest_stack
from switchyard.accelerator.costmodel import COEFFICIENT_NAMES, Coefficients, FloatArray, PhaseCoefficients
from switchyard.accelerator.deployment import make_deployment
from switchyard.accelerator.fitting import bounded_lstsq
from switchyard.accelerator.hardware import get_instance
from switchyard.accelerator.point import point_features, prompt_encoding

__all__ = [
    "LOWER_BOUNDS",
    "STACK_SCOPED",
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
LOWER_BOUNDS = np.array([1.0, 1.0, 1.0, 0.25, 0.0, 0.0, 0.0])

# Coefficients that may differ between software stacks of one hardware generation. Everything else
# (matmul and HBM efficiency, collectives, per-layer, per-step and per-prompt overheads) belongs to the hardware
# and host of a generation and is shared by its stacks. Attention is the part of a forward pass the
# stack's kernels change most (transformers-neuronx rewrote its attention between releases), and
# one coefficient per stack keeps a stack measured on two models from being fitted on its own.
STACK_SCOPED: tuple[str, ...] = ("inv_mfu_attention",)


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
    stack: str = ""

    @property
    def generation(self) -> str:
        """Hardware generation (the instance's calibration group, e.g. trn1)."""
        return get_instance(self.instance).calibration_group

    @property
    def group(self) -> str:
        """Calibration group: generation and software stack, e.g. "trn1/transformers-neuronx 2.18.1"."""
        return group_name(self.generation, self.stack)


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
    """Rows of a benchmark CSV with the columns of benchmarks/data/neuron_benchmarks.csv."""
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
                stack=r.get("stack", ""),
            )
            for r in csv.DictReader(fh)
        ]


def _features(row: BenchmarkRow) -> tuple[FloatArray, FloatArray]:
    dep = make_deployment(row.model, row.instance, row.tp, row.weights)
    ttft, median, _ = point_features(dep, row.batch, row.input_len, row.output_len, prompt_encoding(row.stack))
    return ttft, median


def _design(
    feats: Sequence[FloatArray], row_stacks: Sequence[str], stacks: Sequence[str]
) -> tuple[FloatArray, FloatArray]:
    """Columns: one per shared coefficient, one per stack for each STACK_SCOPED coefficient."""
    cols, lower = [], []
    for k, name in enumerate(COEFFICIENT_NAMES):
        f = np.array([x[k] for x in feats])
        if name in STACK_SCOPED:
            cols += [np.where([rs == st for rs in row_stacks], f, 0.0) for st in stacks]
            lower += [LOWER_BOUNDS[k]] * len(stacks)
        else:
            cols.append(f)
            lower.append(LOWER_BOUNDS[k])
    return np.column_stack(cols), np.array(lower)


def _unpack(x: FloatArray, stacks: Sequence[str]) -> dict[str, PhaseCoefficients]:
    out: dict[str, list[float]] = {st: [] for st in stacks}
    i = 0
    for name in COEFFICIENT_NAMES:
        for j, st in enumerate(stacks):
            out[st].append(float(x[i + j] if name in STACK_SCOPED else x[i]))
        i += len(stacks) if name in STACK_SCOPED else 1
    return {st: PhaseCoefficients.from_array(v) for st, v in out.items()}


def _fit_stacks(rows: Sequence[BenchmarkRow]) -> dict[str, Coefficients]:
    """Coefficients per software stack of rows treated as one generation, minimising squared relative error.

    TTFT rows fit the prefill set, TPOT rows the decode set; only STACK_SCOPED coefficients differ
    between the stacks.
    """
    stacks = sorted({r.stack for r in rows})
    feats = [_features(row) for row in rows]
    row_stacks = [r.stack for r in rows]
    ones = np.ones(len(rows))
    phases = {}
    for phase, k, measured in (("prefill", 0, [r.ttft_ms for r in rows]), ("decode", 1, [r.tpot_ms for r in rows])):
        a, lower = _design([f[k] for f in feats], row_stacks, stacks)
        a = a * (1e3 / np.array(measured))[:, None]
        phases[phase] = _unpack(bounded_lstsq(a, ones, lower), stacks)
    return {st: Coefficients(prefill=phases["prefill"][st], decode=phases["decode"][st]) for st in stacks}


def fit_coefficients(rows: Sequence[BenchmarkRow]) -> dict[str, Coefficients]:
    """Coefficients per calibration group (generation/stack), each generation fitted on its own rows."""
    out: dict[str, Coefficients] = {}
    for gen in sorted({r.generation for r in rows}):
        fitted = _fit_stacks([r for r in rows if r.generation == gen])
        out |= {group_name(gen, st): c for st, c in fitted.items()}
    return out


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
            "stack_scoped": list(STACK_SCOPED),
            "groups": groups,
            "errors": self.summary(),
        }


def calibrate(rows: Sequence[BenchmarkRow]) -> CalibrationResult:
    """Fit coefficients per generation/stack plus a pooled set; evaluate leave-one-model-out.

    The pooled set fits every row as one generation and keeps the newest stack's coefficients: it
    is what generations without measurements use. Cross-validation refits each generation without
    one model and predicts that model's rows (with the newest remaining stack if the model was the
    only one measured on its stack).
    """
    coeffs = fit_coefficients(rows)
    pooled = _fit_stacks(rows)
    coeffs[POOLED_GROUP] = pooled[newest_stack(pooled)]
    in_sample = [
        e for g in sorted({r.group for r in rows}) for e in _predict([r for r in rows if r.group == g], coeffs[g])
    ]
    cv: list[RowError] = []
    for model in sorted({r.model for r in rows}):
        for gen in sorted({r.generation for r in rows}):
            train = [r for r in rows if r.generation == gen and r.model != model]
            test = [r for r in rows if r.generation == gen and r.model == model]
            if not (test and train):
                continue
            fitted = _fit_stacks(train)
            for r in test:
                cv += _predict([r], fitted.get(r.stack) or fitted[newest_stack(fitted)])
    return CalibrationResult(coeffs, in_sample, cv)


def write_result(result: CalibrationResult, out: str | Path, data_source: str) -> None:
    """Write the coefficients file that calibration_data loads."""
    Path(out).write_text(json.dumps(result.to_json(data_source), indent=2) + "\n", encoding="utf-8")
