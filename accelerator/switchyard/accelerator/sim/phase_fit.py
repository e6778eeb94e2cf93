"""The least-squares fit of one phase's coefficients (prefill or decode) to published rows.

Each row's cost-model features (the physical quantities each coefficient multiplies) come from the point-mode model
of its shape and stack; a fit minimises squared relative error under physical floors (LOWER_BOUNDS). Which rows fit
which coefficients of which group is decided in group_fit.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from switchyard.accelerator.sim.benchmark_rows import BenchmarkRow
from switchyard.accelerator.sim.calibration_data import MOE_NXD_STACKS
from switchyard.accelerator.sim.costmodel import COEFFICIENT_NAMES, FloatArray, PhaseCoefficients
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.fitting import bounded_lstsq
from switchyard.accelerator.sim.point import point_features, prompt_encoding

__all__ = ["LOWER_BOUNDS", "PHASES", "fit_phase", "row_features", "row_measured_ms"]

# Physical floors: utilisations cannot exceed 100 %, overheads cannot be negative, collectives cannot run
# faster than a quarter of the catalog's ideal latency (leaves room for catalog error), and gathering an
# expert's weights cannot beat reading them (its added inverse utilisation is >= 0).
LOWER_BOUNDS = np.array([1.0, 1.0, 1.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0])
PHASES = ("prefill", "decode")


def row_features(row: BenchmarkRow) -> tuple[FloatArray, FloatArray]:
    """The cost-model features of a row's TTFT and of its median decode step."""
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


def row_measured_ms(row: BenchmarkRow, phase: str) -> float:
    """What a row measured of `phase`: its TTFT for prefill, its TPOT for decode (NaN where not published)."""
    return row.ttft_ms if phase == "prefill" else row.tpot_ms


def fit_phase(
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
