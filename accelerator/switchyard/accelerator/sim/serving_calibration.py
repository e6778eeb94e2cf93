"""Refit NxD Inference's coefficients on the 2026 serving rows, per Neuron generation, leaving one model out.

The committed fit (calibration.py) knows NxD Inference from ten 2025 rows at one shape (batch 1, ~1,500 -> ~250
tokens), with every generation's hardware taken from transformers-neuronx. The 2026 collection measures the same
stack on many more models and shapes. This module fits, per hardware generation, the coefficients those rows can
determine (SERVING_FREE) on top of the generation's committed NxD Inference set, and refits once per architecture
with that architecture's rows left out, so a fit that memorises rows shows in its errors. It writes nothing:
the committed coefficients are untouched (`benchmarks/bench_fidelity.py --refit` prints what the fit gives).

Rows are calibration.BenchmarkRow on the NxD Inference stack: static batches, and closed loops at concurrency 1
read as a batch of one (TTFT is one prompt's prefill, the ITL a batch-1 decode step on a graph compiled for
`compiled_batch` sequences). Rows of a generation share one set; models are compared by architecture, so a
published alias and its base model are left out together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from switchyard.accelerator.sim.calibration import (
    NEW_STACK_TIED,
    PHASES,
    BenchmarkRow,
    _features,
    _fit_phase,
    _measured,
)
from switchyard.accelerator.sim.calibration_data import NXD_INFERENCE, group_name, load_coefficients
from switchyard.accelerator.sim.costmodel import Coefficients, PhaseCoefficients
from switchyard.accelerator.sim.models import model_aliases

__all__ = ["MIN_ARCHITECTURES", "SERVING_FREE", "ServingFit", "architecture", "fit_generation", "fit_serving"]

# What serving rows of one generation determine, per phase. Prefill: the matmul efficiency (flash attention
# shares it, NEW_STACK_TIED) and the fixed costs per layer, pass and prompt. Decode: HBM bandwidth utilisation
# (batch-1 decode is a weight read: the chip's own number, which the committed set borrows from trn1/inf2),
# attention efficiency, the per-layer and per-step costs, and the cost of gathering each token's experts in a
# mixture-of-experts decode (selective loading), which batch-1 MoE rows measure beside dense ones. Collectives
# and host sampling stay committed: every row runs one tensor-parallel degree per model and samples on the device.
SERVING_FREE: dict[str, tuple[str, ...]] = {
    "prefill": ("inv_mfu", "layer_overhead_s", "step_overhead_s", "prompt_overhead_s"),
    "decode": ("inv_mbu", "inv_mfu_attention", "layer_overhead_s", "step_overhead_s", "expert_gather_inv_mbu"),
}

# A generation is fitted only on rows of at least this many architectures: with fewer, every leave-one-out refit
# is one model's coefficients extrapolated to another (inf2 and trn3 in the 2026 collection).
MIN_ARCHITECTURES = 3


def architecture(model_id: str) -> str:
    """The catalog architecture a published id resolves to (an alias's base, else the id itself)."""
    return model_aliases().get(model_id, model_id)


def fit_generation(rows: Sequence[BenchmarkRow], parent: Coefficients) -> Coefficients:
    """SERVING_FREE fitted on one generation's rows (squared relative error), the rest from `parent`.

    A phase without a single measurement keeps the parent's coefficients.
    """
    feats = [_features(r) for r in rows]
    phases: dict[str, PhaseCoefficients] = {}
    for k, phase in enumerate(PHASES):
        measured = [_measured(r, phase) for r in rows]
        if not any(np.isfinite(m) for m in measured):
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
