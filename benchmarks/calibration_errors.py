"""Calibration errors per hardware group: fit the simulator as the committed calibration is fitted (the three
published tables in benchmarks/data and the 2026 serving rows, sim/data/nxd_serving_rows_2026.csv) and print
in-sample and leave-one-model-out errors (median and p90 of |predicted - measured| / measured, TTFT and TPOT) as
the markdown tables of docs/simulator.md: every group over the three tables' rows, then the serving rows apart
(their decode is fitted per generation and cross-validated by architecture; their prompts fit nothing), then every
row's errors.

    .venv/bin/python benchmarks/calibration_errors.py [--rows] [--prefill-extrapolation]

The same fit as `python -m switchyard.accelerator calibrate --data ... --out ...` (which also writes the
coefficients file); this script only reads. `--prefill-extrapolation` prints the evidence of docs/simulator.md on
how prefill efficiency extrapolates from short to long prompts (issue 16): the transformers-neuronx rows refitted
with an efficiency that grows with the tokens of a pass, and NxD Inference's prefill refitted in the variants of
NXD_VARIANTS, with their predictions for dense 70B and 405B prefills of 10,000 tokens on trn2.48xlarge.
The refits use the calibration's own fitting (phase_fit.py, group_fit.py: the same features and estimator as the
committed fit).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from switchyard.accelerator.sim.calibration import (
    NEW_STACK_SOFTWARE,
    NEW_STACK_TIED,
    STACK_SCOPED,
    BenchmarkRow,
    calibrate,
    read_benchmarks,
)
from switchyard.accelerator.sim.calibration_data import NXD_INFERENCE, POOLED_GROUP
from switchyard.accelerator.sim.costmodel import COEFFICIENT_NAMES, Coefficients, PhaseCoefficients
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.group_fit import fit_all, hardware_parents
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.phase_fit import fit_phase, row_features
from switchyard.accelerator.sim.point import PromptEncoding, point_features, prompt_encoding

DATA = Path(__file__).resolve().parent / "data"
TABLES = ("neuron_benchmarks.csv", "neuron_benchmarks_2025.csv", "gpu_benchmarks.csv")
SERVING_ROWS = (
    Path(__file__).resolve().parents[1] / "accelerator/switchyard/accelerator/sim/data/nxd_serving_rows_2026.csv"
)


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", action="store_true", help="also print every row's errors")
    parser.add_argument(
        "--prefill-extrapolation", action="store_true", help="print the long-prompt prefill evidence (issue 16) instead"
    )
    args = parser.parse_args()
    rows = read_benchmarks(*(DATA / t for t in TABLES))
    if args.prefill_extrapolation:
        print_prefill_extrapolation(rows)
        return
    fit = calibrate([*rows, *read_benchmarks(SERVING_ROWS)])
    result = dataclasses.replace(
        fit,
        in_sample=[e for e in fit.in_sample if not e.row.per_generation],
        cross_validation=[e for e in fit.cross_validation if not e.row.per_generation],
    )
    serving = dataclasses.replace(
        fit,
        in_sample=[e for e in fit.in_sample if e.row.per_generation],
        cross_validation=[e for e in fit.cross_validation if e.row.per_generation],
    )
    print(
        "| group | rows (TTFT/TPOT) | TTFT median | TTFT p90 | TPOT median | TPOT p90 | CV TTFT median | CV TTFT p90 |"
        " CV TPOT median | CV TPOT p90 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    groups = {"all rows": result.summary()} | result.summary_by_group() | {"2026 serving rows": serving.summary()}
    for name, s in groups.items():
        i, c = s["in_sample"], s["leave_one_model_out"]
        cells = [
            f"{i['ttft_rows']:.0f}/{i['tpot_rows']:.0f}",
            *(
                _pct(i[k])
                for k in ("ttft_median_abs_pct", "ttft_p90_abs_pct", "tpot_median_abs_pct", "tpot_p90_abs_pct")
            ),
            *(
                _pct(c[k])
                for k in ("ttft_median_abs_pct", "ttft_p90_abs_pct", "tpot_median_abs_pct", "tpot_p90_abs_pct")
            ),
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.rows:
        cv = {e.row: e for e in fit.cross_validation}
        print()
        print(
            f"{'model':40} {'instance':14} {'stack':28} {'B':>2} {'in':>5} {'out':>5} "
            f"{'TTFT':>8} {'err%':>6} {'CV%':>6} {'TPOT':>6} {'err%':>6} {'CV%':>6}"
        )
        for e in fit.in_sample:
            r, held_out = e.row, cv.get(e.row)
            print(
                f"{r.model[:40]:40} {r.instance:14} {r.stack[:28]:28} {r.batch:>2} {r.input_len:>5} {r.output_len:>5} "
                f"{r.ttft_ms:8.1f} {e.ttft_err * 100:6.1f} {(held_out.ttft_err * 100 if held_out else math.nan):6.1f} "
                f"{r.tpot_ms:6.2f} {e.tpot_err * 100:6.1f} {(held_out.tpot_err * 100 if held_out else math.nan):6.1f}"
            )


# --- Issue 16: how the prefill efficiency extrapolates from short to long prompts (--prefill-extrapolation) ---

LONG_PROMPT_MODELS = ("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct")
SOFTWARE_PREFILL = ("inv_mfu", "inv_mfu_attention", "layer_overhead_s", "step_overhead_s")


def prefill_fraction_of_peak(
    coeffs: PhaseCoefficients, model: str, input_len: int, instance: str = "trn2.48xlarge", tp: int = 64
) -> dict[str, float]:
    """Predicted batch-1 prefill of `model` with its implied fraction of the replica's dense BF16 peak.

    `padded` counts the work the compiled graph does (the prompt padded to its bucket, the full square of
    attention); `useful` counts the prompt's own tokens and causal attention (half the square).
    """
    dep = make_deployment(model, instance, tp)
    feats, _, _ = point_features(dep, 1, input_len, 2, moe_nxd=True)
    terms = coeffs.as_array() * feats
    seconds = float(terms.sum())
    useful = input_len * dep.linear_flops_per_token + input_len * input_len / 2 * dep.attention_flops_per_qk
    return {
        "ttft_ms": seconds * 1e3,
        "padded_fraction": float(feats[0] + feats[1]) / seconds,
        "useful_fraction": useful / dep.peak_flops / seconds,
        "matmul_share": float(terms[0]) / seconds,
        "attention_share": float(terms[1]) / seconds,
    }


def _abs_quantiles(errors: list[float]) -> tuple[float, float]:
    a = np.abs(np.array(errors)) * 100
    return float(np.median(a)), float(np.percentile(a, 90))


def saturating_mfu_check(rows: list[BenchmarkRow], n_half: float) -> dict[str, Any]:
    """Refit the transformers-neuronx prefill sets with MFU(n) = MFU_max n / (n + n_half), n = tokens per pass.

    matmul time = F (n + n_half) / (peak MFU_max) for F the FLOPs of one token, so a fixed n_half keeps the fit
    linear: every pass is charged n_half more tokens of matmul at the fitted efficiency. Returns the in-sample TTFT
    errors of the 54 rows and each generation's MFU_max.
    """
    old = [r for r in rows if r.stack.startswith("transformers-neuronx")]
    errors: list[float] = []
    mfu_max = {}
    for gen in sorted({r.generation for r in old}):
        unit = [r for r in old if r.generation == gen]
        feats = []
        for r in unit:
            f = row_features(r)[0].copy()
            dep = make_deployment(r.model, r.instance, r.tp, r.weights)
            passes = r.batch if prompt_encoding(r.stack) is PromptEncoding.PER_PROMPT else 1
            f[0] += passes * n_half * dep.linear_flops_per_token / dep.peak_flops
            feats.append(f)
        stacks = sorted({r.stack for r in unit})
        fitted = fit_phase(feats, [r.ttft_ms for r in unit], [r.stack for r in unit], stacks, scoped=STACK_SCOPED)
        errors += [
            float(fitted[r.stack].as_array() @ f) * 1e3 / r.ttft_ms - 1 for r, f in zip(unit, feats, strict=True)
        ]
        mfu_max[gen] = 1 / fitted[stacks[-1]].inv_mfu
    median, p90 = _abs_quantiles(errors)
    return {"n_half": n_half, "ttft_median": median, "ttft_p90": p90, "mfu_max": mfu_max}


# How the NxD Inference prefill software coefficients are fitted in each variant: "fitted" is group_fit.py's
# (the committed coefficients); "old-stack MFU" holds the matmul (and tied attention) efficiency at each chip's
# transformers-neuronx value and fits only the per-layer and per-step costs (candidate a); "MoE own MFU" gives the
# mixture-of-experts rows (every expert computes every token) an efficiency of their own.
NXD_VARIANTS = ("fitted", "old-stack MFU", "MoE own MFU")


def _nxd_kind(row: BenchmarkRow, variant: str) -> str:
    return "moe" if variant == "MoE own MFU" and get_model(row.model).is_moe else "dense"


def _fit_nxd_prefill(
    unit: list[BenchmarkRow], parents: dict[str, Coefficients], variant: str
) -> dict[str, PhaseCoefficients]:
    kinds = [_nxd_kind(r, variant) for r in unit]
    free = NEW_STACK_SOFTWARE["prefill"]
    if variant == "old-stack MFU":
        free = tuple(n for n in free if n != "inv_mfu")
    return fit_phase(
        [row_features(r)[0] for r in unit],
        [r.ttft_ms for r in unit],
        kinds,
        sorted(set(kinds)),
        free=free,
        scoped=("inv_mfu",) if variant == "MoE own MFU" else (),
        tied=NEW_STACK_TIED["prefill"],
        parents=[parents[r.generation].prefill for r in unit],
    )


def _nxd_prefill(
    fitted: dict[str, PhaseCoefficients], hardware: Coefficients, kind: str, variant: str
) -> PhaseCoefficients:
    software = fitted[kind]
    values = {n: getattr(hardware.prefill, n) for n in COEFFICIENT_NAMES}
    names = ("layer_overhead_s", "step_overhead_s") if variant == "old-stack MFU" else SOFTWARE_PREFILL
    values |= {n: getattr(software, n) for n in names}
    values["inv_mfu_attention"] = values["inv_mfu"]  # flash attention at the matmul efficiency (NEW_STACK_TIED)
    return PhaseCoefficients(**values)


def nxd_prefill_variant(rows: list[BenchmarkRow], variant: str) -> dict[str, Any]:
    """NxD Inference prefill refitted as `variant` (NXD_VARIANTS): TTFT errors per generation in sample and leave one
    model out, the trn2 dense coefficients, and the long-prompt predictions on trn2.48xlarge TP64."""
    old_stack = {g: c for g, c in fit_all(rows).items() if not g.endswith(NXD_INFERENCE)}
    hardware = hardware_parents(old_stack, old_stack[POOLED_GROUP])
    new = [r for r in rows if r.new_stack]
    fitted = _fit_nxd_prefill(new, hardware, variant)

    def predict(r: BenchmarkRow, fit: dict[str, PhaseCoefficients]) -> float:
        kind = _nxd_kind(r, variant)
        return float(_nxd_prefill(fit, hardware[r.generation], kind, variant).as_array() @ row_features(r)[0]) * 1e3

    errors: dict[str, dict[str, list[float]]] = {}
    for r in new:
        train = [t for t in new if t.model != r.model]
        by_gen = errors.setdefault(r.generation, {"in_sample": [], "cv": []})
        by_gen["in_sample"].append(predict(r, fitted) / r.ttft_ms - 1)
        if _nxd_kind(r, variant) in {_nxd_kind(t, variant) for t in train}:
            by_gen["cv"].append(predict(r, _fit_nxd_prefill(train, hardware, variant)) / r.ttft_ms - 1)
    trn2 = _nxd_prefill(fitted, hardware["trn2"], "dense", variant)
    return {
        "errors": {g: {k: _abs_quantiles(v) for k, v in e.items()} for g, e in errors.items()},
        "trn2_dense": trn2.describe(),
        "long_prompts": {
            (m, n): prefill_fraction_of_peak(trn2, m, n) for m in LONG_PROMPT_MODELS for n in (1500, 10_000)
        },
    }


def print_prefill_extrapolation(rows: list[BenchmarkRow]) -> None:
    print("Saturating MFU on the transformers-neuronx rows (54 rows at 128-8,192 tokens, batch 1-8), in-sample TTFT:")
    print("| n_half (tokens) | TTFT median | TTFT p90 | MFU_max inf2 / trn1 |")
    print("|---|---|---|---|")
    for n_half in (0, 256, 512, 1024):
        s = saturating_mfu_check(rows, n_half)
        mfu = " / ".join(f"{v:.3f}" for v in s["mfu_max"].values())
        print(f"| {n_half:,} | {s['ttft_median']:.1f} | {s['ttft_p90']:.1f} | {mfu} |")
    print()
    print("NxD Inference prefill variants (TTFT |error| %, median / p90; CV = leave one model out):")
    print(
        "| variant | trn2 MFU | per-layer µs | per-step µs | inf2 | inf2 CV | trn1 | trn1 CV | trn2 | trn2 CV |"
        " 70B 1.5k / 10k ms | 405B 1.5k / 10k ms | 70B / 405B 10k share of peak (padded; useful) |"
        " 70B 1.5k share not matmul or attention |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for variant in NXD_VARIANTS:
        v = nxd_prefill_variant(rows, variant)
        c = v["trn2_dense"]
        cells = [variant, f"{c['mfu']:.3f}", f"{c['layer_overhead_us']:,.0f}", f"{c['step_overhead_us']:,.0f}"]
        for gen in ("inf2", "trn1", "trn2"):
            for kind in ("in_sample", "cv"):
                median, p90 = v["errors"][gen][kind]
                cells.append(f"{median:.1f} / {p90:.1f}")
        lp = v["long_prompts"]
        for m in LONG_PROMPT_MODELS:
            cells.append(f"{lp[(m, 1500)]['ttft_ms']:,.0f} / {lp[(m, 10_000)]['ttft_ms']:,.0f}")
        cells.append(
            " / ".join(
                f"{lp[(m, 10_000)]['padded_fraction']:.2f}; {lp[(m, 10_000)]['useful_fraction']:.2f}"
                for m in LONG_PROMPT_MODELS
            )
        )
        short = lp[(LONG_PROMPT_MODELS[0], 1500)]
        cells.append(f"{1 - short['matmul_share'] - short['attention_share']:.2f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
