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

from switchyard.accelerator.sim.calibration_data import (
    MOE_NXD_STACKS,
    NXD_INFERENCE,
    POOLED_GROUP,
    canonical_stack,
    group_name,
    host_sampling,
    newest_stack,
)
from switchyard.accelerator.sim.costmodel import COEFFICIENT_NAMES, Coefficients, FloatArray, PhaseCoefficients
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.fitting import bounded_lstsq
from switchyard.accelerator.sim.hardware import get_instance, list_instances
from switchyard.accelerator.sim.models import model_aliases
from switchyard.accelerator.sim.point import point_features, prompt_encoding

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
    "read_benchmarks",
    "write_result",
]

# Physical floors: utilisations cannot exceed 100 %, overheads cannot be negative, collectives cannot run
# faster than a quarter of the catalog's ideal latency (leaves room for catalog error), and gathering an
# expert's weights cannot beat reading them (its added inverse utilisation is >= 0).
LOWER_BOUNDS = np.array([1.0, 1.0, 1.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0])

# Coefficients that may differ between software stacks of one hardware generation. Everything else
# (matmul and HBM efficiency, collectives, per-layer, per-step and per-prompt overheads) belongs to the hardware
# and host of a generation and is shared by its stacks. Attention is the part of a forward pass the
# stack's kernels change most (transformers-neuronx rewrote its attention between releases), and
# one coefficient per stack keeps a stack measured on two models from being fitted on its own.
STACK_SCOPED: tuple[str, ...] = ("inv_mfu_attention",)

# The NxD Inference stack is measured on three generations (trn1, inf2, trn2) but in ten rows, all at one
# shape (batch 1, ~1,500 -> ~250 tokens): too few to fit every coefficient per generation. Its software
# coefficients are fitted once across the generations, against each chip's own peak rates; what belongs
# to the chip and its interconnect (HBM efficiency, collective scale) is inherited from that generation's
# transformers-neuronx fit (the pooled set for Trainium2/3). Flash attention runs on the same PE array as
# the matmuls, so in prefill attention FLOPs share the matmul efficiency (NEW_STACK_TIED).
NEW_STACK_SOFTWARE: dict[str, tuple[str, ...]] = {
    "prefill": ("inv_mfu", "layer_overhead_s", "step_overhead_s"),
    "decode": ("inv_mfu_attention", "layer_overhead_s", "step_overhead_s", "host_sampling_s_per_logit"),
}
NEW_STACK_TIED: dict[str, dict[str, str]] = {"prefill": {"inv_mfu_attention": "inv_mfu"}, "decode": {}}
PHASES = ("prefill", "decode")
# GPU engines (LMDeploy, TensorRT-LLM, vLLM) share one set: 20 of the 26 GPU rows are LMDeploy's, the other
# engines have one to three rows each (two without a TPOT), too few to give any coefficient of their own.
GPU_STACK_SCOPED: tuple[str, ...] = ()
# GPU chips the GPU set is fitted on; rows on other GPUs (H100) are predicted by transfer, never fitted.
GPU_FIT_CHIPS = frozenset({"A100-80GB", "A100-40GB"})

# Serving rows (BenchmarkRow.per_generation: the 2026 collection) measure NxD Inference on many models and shapes of
# one generation. What they determine, per phase, on top of the cross-generation set. Decode: HBM bandwidth
# utilisation (batch-1 decode is a weight read: the chip's own number, which the cross-generation set borrows from
# trn1/inf2), attention efficiency, the per-layer and per-step costs, and the cost of gathering each token's experts
# in a mixture-of-experts decode (selective loading), which batch-1 MoE rows measure beside dense ones. Prefill:
# nothing. The trn2 rows fit it only with a fixed cost of 80-140 ms a pass (TP4-16), which the dense TP64 rows of the
# same generation contradict (Llama-3.3-70B's prefix-caching pairs start at 90 ms in all; docs/simulator.md), and
# the matmul efficiency alone fits them worse than the cross-generation set. Collectives and host sampling stay
# cross-generation: every row runs one tensor-parallel degree per model and samples on the device.
SERVING_FREE: dict[str, tuple[str, ...]] = {
    "prefill": (),
    "decode": ("inv_mbu", "inv_mfu_attention", "layer_overhead_s", "step_overhead_s", "expert_gather_inv_mbu"),
}
# A generation is fitted on its serving rows only when they cover at least this many architectures: with fewer,
# every leave-one-out refit is one model's coefficients extrapolated to another (inf2 and trn3 in the 2026 rows).
MIN_ARCHITECTURES = 3


@dataclass(frozen=True, slots=True)
class BenchmarkRow:
    """One published measurement (a row of neuron_benchmarks*.csv or gpu_benchmarks.csv).

    `stack` is the software stack the row calibrates (canonical_stack of the published column, which
    `published_stack` keeps); a TTFT or TPOT the source does not give is NaN.
    """

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
    compiled_batch: int = 0  # batch the decode graph was compiled for (0: the batch's own bucket)
    published_stack: str = ""
    # A serving row (NxD Inference): fits its generation's own set (SERVING_FREE) on top of the cross-generation
    # one, which it does not enter; the table's optional `fit` column says "generation".
    per_generation: bool = False

    @property
    def generation(self) -> str:
        """Hardware generation (the instance's calibration group, e.g. trn1)."""
        return get_instance(self.instance).calibration_group

    @property
    def group(self) -> str:
        """Calibration group: generation and software stack, e.g. "trn1/transformers-neuronx 2.18.1"."""
        return group_name(self.generation, self.stack)

    @property
    def host_sampling(self) -> bool:
        return host_sampling(self.published_stack)

    @property
    def new_stack(self) -> bool:
        """Calibrated as NxD Inference (software shared across Neuron generations)."""
        return self.stack == NXD_INFERENCE


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


def _number(text: str | None) -> float:
    return float(text) if text not in (None, "") else float("nan")


def read_benchmarks(*paths: str | Path) -> list[BenchmarkRow]:
    """Rows of benchmark CSVs with the columns of benchmarks/data/neuron_benchmarks.csv.

    Optional columns: `compiled_batch`, `fit` ("generation": BenchmarkRow.per_generation); an empty ttft_p50_ms or
    tpot_p50_ms is read as NaN.
    """
    rows = []
    for path in paths:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            rows += [
                BenchmarkRow(
                    model=r["model"],
                    instance=r["instance"],
                    tp=int(r["tp"]),
                    batch=int(r["batch"]),
                    input_len=int(r["input_len"]),
                    output_len=int(r["output_len"]),
                    weights="bf16" if r["weights"] == "fp16" else r["weights"],
                    ttft_ms=_number(r["ttft_p50_ms"]),
                    tpot_ms=_number(r["tpot_p50_ms"]),
                    stack=canonical_stack(r.get("stack", "")),
                    compiled_batch=int(r.get("compiled_batch") or 0),
                    published_stack=r.get("stack", ""),
                    per_generation=(r.get("fit") or "") == "generation",
                )
                for r in csv.DictReader(fh)
            ]
    return rows


def _features(row: BenchmarkRow) -> tuple[FloatArray, FloatArray]:
    dep = make_deployment(row.model, row.instance, row.tp, row.weights)
    ttft, median, _ = point_features(
        dep,
        row.batch,
        row.input_len,
        row.output_len,
        prompt_encoding(row.stack),
        compiled_batch=row.compiled_batch or None,
        host_sampling=row.host_sampling,
        moe_nxd=row.stack in MOE_NXD_STACKS,
    )
    return ttft, median


def _measured(row: BenchmarkRow, phase: str) -> float:
    return row.ttft_ms if phase == "prefill" else row.tpot_ms


def _fit_phase(
    feats: Sequence[FloatArray],
    measured_ms: Sequence[float],
    row_stacks: Sequence[str],
    stacks: Sequence[str],
    *,
    free: Sequence[str] = COEFFICIENT_NAMES,
    scoped: Sequence[str] = (),
    tied: dict[str, str] | None = None,
    parents: Sequence[PhaseCoefficients] | None = None,
) -> dict[str, PhaseCoefficients]:
    """Least squares on relative error over the rows with a measurement, per stack of `stacks`.

    `free` coefficients are fitted (one value per stack for those in `scoped`, shared otherwise); the others
    come from each row's `parents` set; a coefficient `tied` to another takes that one's value.
    """
    tied = tied or {}
    keep = [i for i, m in enumerate(measured_ms) if np.isfinite(m)]
    f = np.array([feats[i] for i in keep])  # rows x names
    y = np.array([measured_ms[i] for i in keep]) / 1e3
    rs = [row_stacks[i] for i in keep]
    fixed = np.zeros(len(keep))
    cols: list[FloatArray] = []
    lower: list[float] = []
    params: list[tuple[str, str | None]] = []  # (name, stack or None: shared)
    for k, name in enumerate(COEFFICIENT_NAMES):
        if name in tied:
            continue
        col = f[:, k] + sum(
            (f[:, j] for j, n in enumerate(COEFFICIENT_NAMES) if tied.get(n) == name), np.zeros(len(keep))
        )
        if name not in free:
            assert parents is not None, name
            # the parent's value, charged on the columns tied to this coefficient too
            fixed += np.array([parents[i].as_array()[k] for i in keep]) * col
            continue
        if name in scoped:
            for st in stacks:
                cols.append(np.where([r == st for r in rs], col, 0.0))
                lower.append(LOWER_BOUNDS[k])
                params.append((name, st))
        else:
            cols.append(col)
            lower.append(LOWER_BOUNDS[k])
            params.append((name, None))
    a = np.column_stack(cols) / y[:, None]
    x = bounded_lstsq(a, 1.0 - fixed / y, np.array(lower))
    out = {}
    for st in stacks:
        values = dict(
            zip(
                COEFFICIENT_NAMES,
                parents[rs.index(st)].as_array() if parents and st in rs else PhaseCoefficients().as_array(),
                strict=True,
            )
        )
        for (name, pst), v in zip(params, x, strict=True):
            if pst in (None, st):
                values[name] = float(v)
        for name, target in tied.items():
            values[name] = values[target]
        out[st] = PhaseCoefficients(**values)
    return out


def _fit_stacks(rows: Sequence[BenchmarkRow], scoped: Sequence[str] = STACK_SCOPED) -> dict[str, Coefficients]:
    """Coefficients per software stack of rows treated as one generation, minimising squared relative error.

    TTFT rows fit the prefill set, TPOT rows the decode set; only STACK_SCOPED coefficients differ
    between the stacks.
    """
    stacks = sorted({r.stack for r in rows})
    feats = [_features(row) for row in rows]
    row_stacks = [r.stack for r in rows]
    phases = {}
    for k, phase in enumerate(PHASES):
        phases[phase] = _fit_phase(
            [f[k] for f in feats], [_measured(r, phase) for r in rows], row_stacks, stacks, scoped=scoped
        )
    return {st: Coefficients(prefill=phases["prefill"][st], decode=phases["decode"][st]) for st in stacks}


def _fit_new_stack(rows: Sequence[BenchmarkRow], parents: dict[str, Coefficients]) -> dict[str, PhaseCoefficients]:
    """NxD Inference's software coefficients, one set per phase, fitted over every generation's rows."""
    feats = [_features(row) for row in rows]
    out = {}
    for k, phase in enumerate(PHASES):
        fitted = _fit_phase(
            [f[k] for f in feats],
            [_measured(r, phase) for r in rows],
            [NXD_INFERENCE] * len(rows),
            [NXD_INFERENCE],
            free=NEW_STACK_SOFTWARE[phase],
            tied=NEW_STACK_TIED[phase],
            parents=[getattr(parents[r.generation], phase) for r in rows],
        )
        out[phase] = fitted[NXD_INFERENCE]
    return out


def _with_software(hardware: Coefficients, software: dict[str, PhaseCoefficients]) -> Coefficients:
    """A generation's hardware coefficients with the new stack's software coefficients."""
    phases = {}
    for phase in PHASES:
        values = dict(zip(COEFFICIENT_NAMES, getattr(hardware, phase).as_array(), strict=True))
        sw = software[phase]
        for name in (*NEW_STACK_SOFTWARE[phase], *NEW_STACK_TIED[phase]):
            values[name] = getattr(sw, name)
        phases[phase] = PhaseCoefficients(**values)
    return Coefficients(**phases, moe_nxd=True)


def _hardware_parents(old: dict[str, Coefficients], pooled: Coefficients) -> dict[str, Coefficients]:
    """Per Neuron generation, the newest transformers-neuronx set (the pooled one where none was measured)."""
    out = {}
    for inst in list_instances():
        gen = inst.calibration_group
        if not inst.chip.static_shapes or gen in out:
            continue
        stacks = {}
        for key, coeffs in old.items():
            generation, _, stack = key.partition("/")
            if generation == gen and stack != NXD_INFERENCE:  # an NxD Inference set is software, not hardware
                stacks[stack] = coeffs
        out[gen] = stacks[newest_stack(stacks)] if stacks else pooled
    return out


def architecture(model_id: str) -> str:
    """The catalog architecture a published id resolves to (an alias's base, else the id itself)."""
    return model_aliases().get(model_id, model_id)


def fit_generation(rows: Sequence[BenchmarkRow], parent: Coefficients) -> Coefficients:
    """SERVING_FREE fitted on one generation's NxD Inference rows (squared relative error), the rest from `parent`.

    A phase with no free coefficient or without a single measurement keeps the parent's coefficients.
    """
    feats = [_features(r) for r in rows]
    phases: dict[str, PhaseCoefficients] = {}
    for k, phase in enumerate(PHASES):
        measured = [_measured(r, phase) for r in rows]
        if not SERVING_FREE[phase] or not any(np.isfinite(m) for m in measured):
            phases[phase] = getattr(parent, phase)
            continue
        fitted = _fit_phase(
            [f[k] for f in feats],
            measured,
            [NXD_INFERENCE] * len(rows),
            [NXD_INFERENCE],
            free=SERVING_FREE[phase],
            tied=NEW_STACK_TIED[phase],
            parents=[getattr(parent, phase)] * len(rows),
        )
        phases[phase] = fitted[NXD_INFERENCE]
    return Coefficients(**phases, moe_nxd=True)


def _serving_generations(rows: Sequence[BenchmarkRow]) -> frozenset[str]:
    """Generations whose serving rows cover at least MIN_ARCHITECTURES architectures (fitted on their own)."""
    serving = [r for r in rows if r.new_stack and r.per_generation]
    archs = {(r.generation, architecture(r.model)) for r in serving}
    gens = {gen for gen, _ in archs}
    return frozenset(g for g in gens if sum(gen == g for gen, _ in archs) >= MIN_ARCHITECTURES)


def _fit_all(rows: Sequence[BenchmarkRow]) -> dict[str, Coefficients]:
    old_rows = [r for r in rows if not r.new_stack and get_instance(r.instance).chip.static_shapes]
    gpu_rows = [r for r in rows if get_instance(r.instance).chip.name in GPU_FIT_CHIPS]
    new_rows = [r for r in rows if r.new_stack and not r.per_generation]
    out: dict[str, Coefficients] = {}
    for gen in sorted({r.generation for r in old_rows}):
        fitted = _fit_stacks([r for r in old_rows if r.generation == gen])
        out |= {group_name(gen, st): c for st, c in fitted.items()}
    if old_rows:
        pooled = _fit_stacks(old_rows)
        out[POOLED_GROUP] = pooled[newest_stack(pooled)]
    if new_rows:
        parents = _hardware_parents(out, out.get(POOLED_GROUP, Coefficients()))
        software = _fit_new_stack(new_rows, parents)
        out |= {group_name(gen, NXD_INFERENCE): _with_software(hw, software) for gen, hw in parents.items()}
        for gen in sorted(_serving_generations(rows)):
            unit = [r for r in rows if r.per_generation and r.new_stack and r.generation == gen]
            out[group_name(gen, NXD_INFERENCE)] = fit_generation(unit, out[group_name(gen, NXD_INFERENCE)])
    for gen in sorted({r.generation for r in gpu_rows}):
        fitted = _fit_stacks([r for r in gpu_rows if r.generation == gen], GPU_STACK_SCOPED)
        out |= {group_name(gen, st): c for st, c in fitted.items()}
    return out


def fit_coefficients(rows: Sequence[BenchmarkRow]) -> dict[str, Coefficients]:
    """Coefficients per calibration group (generation/stack).

    transformers-neuronx and GPU engines: each generation fitted on its own rows; NxD Inference: software
    coefficients fitted across generations on the chips' hardware coefficients (see NEW_STACK_SOFTWARE),
    one group per Neuron generation of the catalog, Trainium2/3 included, then refitted (SERVING_FREE) on a
    generation's own serving rows (BenchmarkRow.per_generation) where they cover MIN_ARCHITECTURES architectures.
    """
    return {k: v for k, v in _fit_all(rows).items() if k != POOLED_GROUP}


def _predict(rows: Sequence[BenchmarkRow], coeffs: Coefficients) -> list[RowError]:
    cp, cd = coeffs.prefill.as_array(), coeffs.decode.as_array()
    out = []
    for row in rows:
        ttft, tpot = _features(row)
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
    own_fit = _serving_generations(rows)
    parents = _hardware_parents(fitted, fitted.get(POOLED_GROUP, Coefficients()))
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
                    coeffs = _with_software(parents[r.generation], _fit_new_stack(unit, parents))
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
                stacks = _fit_stacks(unit, GPU_STACK_SCOPED if gpu_row else STACK_SCOPED)
                coeffs = stacks.get(r.stack) or stacks[newest_stack(stacks)]
            cv += _predict([r], coeffs)
    return cv


def calibrate(rows: Sequence[BenchmarkRow]) -> CalibrationResult:
    """Fit coefficients per generation/stack plus a pooled set; evaluate leave-one-model-out.

    The pooled set fits every transformers-neuronx row as one generation and keeps the newest stack's
    coefficients: it is the hardware prior of Neuron generations without transformers-neuronx measurements
    (Trainium2/3) and what the wafer-scale CS-3 uses. Cross-validation refits without one model and predicts
    that model's rows (with the newest remaining stack if the model was the only one measured on its stack).
    """
    coeffs = _fit_all(rows)
    in_sample = []
    for g in sorted({r.group for r in rows}):
        in_sample += _predict([r for r in rows if r.group == g], coeffs[g])
    return CalibrationResult(coeffs, in_sample, _cross_validate(rows, coeffs))


def write_result(result: CalibrationResult, out: str | Path, data_source: str) -> None:
    """Write the coefficients file that calibration_data loads."""
    Path(out).write_text(json.dumps(result.to_json(data_source), indent=2) + "\n", encoding="utf-8")
