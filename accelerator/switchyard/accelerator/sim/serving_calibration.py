"""NxD Inference's per-generation fit on the 2026 serving rows, cross-validated by leaving one architecture out.

The cross-generation fit (calibration.py) knows NxD Inference from ten 2025 rows at one shape (batch 1, ~1,500 ->
~250 tokens), with every generation's hardware taken from transformers-neuronx. The 2026 collection measures the
same stack on many more models and shapes. Given them (`calibrate --data sim/data/nxd_serving_rows_2026.csv`, rows
whose `fit` column says "generation"), `calibrate` fits, per hardware generation whose serving rows cover
MIN_ARCHITECTURES architectures, the coefficients those rows can determine (SERVING_FREE) on top of the
cross-generation set (calibration.fit_generation); the committed calibration does not include them yet
(docs/simulator.md). This module repeats that fit on the rows it is given, once in full and once per architecture
with that architecture's rows left out, so a fit that memorises rows shows in its errors
(`benchmarks/bench_fidelity.py --refit` prints both). It writes nothing.

Rows are calibration.BenchmarkRow on the NxD Inference stack: static batches, and closed loops at concurrency 1
read as a batch of one (TTFT is one prompt's prefill, the ITL a batch-1 decode step on a graph compiled for
`compiled_batch` sequences). Rows of a generation share one set; models are compared by architecture, so a
published alias and its base model are left out together. The parent is the committed set of the generation,
whose coefficients outside SERVING_FREE are the cross-generation ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from switchyard.accelerator.sim.calibration import (
    MIN_ARCHITECTURES,
    SERVING_FREE,
    BenchmarkRow,
    architecture,
    fit_generation,
)
from switchyard.accelerator.sim.calibration_data import NXD_INFERENCE, group_name, load_coefficients
from switchyard.accelerator.sim.costmodel import Coefficients

__all__ = ["MIN_ARCHITECTURES", "SERVING_FREE", "ServingFit", "architecture", "fit_generation", "fit_serving"]


@dataclass(frozen=True, slots=True)
class ServingFit:
    """Per fitted generation: the fit on all its rows, and one refit per architecture with that architecture left
    out. `unfitted` names the generations whose rows cover fewer than MIN_ARCHITECTURES architectures."""

    coefficients: dict[str, Coefficients]
    held_out: dict[tuple[str, str], Coefficients]  # (generation, architecture) -> fit without it
    architectures: dict[str, frozenset[str]]  # generation -> architectures its fit saw
    unfitted: frozenset[str] = frozenset()

    def for_row(self, generation: str, model_id: str) -> Coefficients | None:
        """Coefficients that never saw `model_id`: the refit without its architecture if the generation's fit saw
        it, the full fit if not; None when the generation was not fitted."""
        if generation not in self.coefficients:
            return None
        arch = architecture(model_id)
        if arch not in self.architectures[generation]:
            return self.coefficients[generation]
        return self.held_out.get((generation, arch))


def fit_serving(rows: Sequence[BenchmarkRow]) -> ServingFit:
    """Fit every generation of `rows` with at least MIN_ARCHITECTURES architectures on its committed NxD Inference
    set, and its leave-one-architecture-out refits."""
    committed = load_coefficients()
    coefficients: dict[str, Coefficients] = {}
    held_out: dict[tuple[str, str], Coefficients] = {}
    architectures: dict[str, frozenset[str]] = {}
    unfitted: set[str] = set()
    for gen in sorted({r.generation for r in rows}):
        unit = [r for r in rows if r.generation == gen]
        archs = frozenset(architecture(r.model) for r in unit)
        if len(archs) < MIN_ARCHITECTURES:
            unfitted.add(gen)
            continue
        parent = committed[group_name(gen, NXD_INFERENCE)]
        coefficients[gen] = fit_generation(unit, parent)
        architectures[gen] = archs
        for arch in sorted(archs):
            held_out[(gen, arch)] = fit_generation([r for r in unit if architecture(r.model) != arch], parent)
    return ServingFit(coefficients, held_out, architectures, frozenset(unfitted))
