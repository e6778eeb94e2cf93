"""Which published rows fit which coefficients of which calibration group (generation/software stack).

transformers-neuronx and GPU engines: each generation fitted on its own rows, stacks sharing all but STACK_SCOPED;
NxD Inference: software coefficients (NEW_STACK_SOFTWARE) fitted across generations on each generation's hardware
coefficients, then refitted (SERVING_FREE) on a generation's own serving rows where they cover enough architectures.
Each fit is phase_fit.fit_phase over the rows of its unit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from switchyard.accelerator.sim.benchmark_rows import BenchmarkRow, architecture
from switchyard.accelerator.sim.calibration_data import NXD_INFERENCE, POOLED_GROUP, group_name, newest_stack
from switchyard.accelerator.sim.costmodel import COEFFICIENT_NAMES, Coefficients, PhaseCoefficients
from switchyard.accelerator.sim.hardware import get_instance, list_instances
from switchyard.accelerator.sim.phase_fit import PHASES, fit_phase, row_features, row_measured_ms

__all__ = [
    "GPU_FIT_CHIPS",
    "GPU_STACK_SCOPED",
    "MIN_ARCHITECTURES",
    "NEW_STACK_SOFTWARE",
    "NEW_STACK_TIED",
    "SERVING_FREE",
    "STACK_SCOPED",
    "fit_all",
    "fit_coefficients",
    "fit_generation",
    "fit_new_stack",
    "fit_stacks",
    "hardware_parents",
    "serving_generations",
    "with_software",
]

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


def fit_stacks(rows: Sequence[BenchmarkRow], scoped: Sequence[str] = STACK_SCOPED) -> dict[str, Coefficients]:
    """Coefficients per software stack of rows treated as one generation, minimising squared relative error.

    TTFT rows fit the prefill set, TPOT rows the decode set; only STACK_SCOPED coefficients differ
    between the stacks.
    """
    stacks = sorted({r.stack for r in rows})
    feats = [row_features(row) for row in rows]
    row_stacks = [r.stack for r in rows]
    phases = {}
    for k, phase in enumerate(PHASES):
        phases[phase] = fit_phase(
            [f[k] for f in feats], [row_measured_ms(r, phase) for r in rows], row_stacks, stacks, scoped=scoped
        )
    return {st: Coefficients(prefill=phases["prefill"][st], decode=phases["decode"][st]) for st in stacks}


def fit_new_stack(rows: Sequence[BenchmarkRow], parents: dict[str, Coefficients]) -> dict[str, PhaseCoefficients]:
    """NxD Inference's software coefficients, one set per phase, fitted over every generation's rows."""
    feats = [row_features(row) for row in rows]
    out = {}
    for k, phase in enumerate(PHASES):
        fitted = fit_phase(
            [f[k] for f in feats],
            [row_measured_ms(r, phase) for r in rows],
            [NXD_INFERENCE] * len(rows),
            [NXD_INFERENCE],
            free=NEW_STACK_SOFTWARE[phase],
            tied=NEW_STACK_TIED[phase],
            parents=[getattr(parents[r.generation], phase) for r in rows],
        )
        out[phase] = fitted[NXD_INFERENCE]
    return out


def with_software(hardware: Coefficients, software: dict[str, PhaseCoefficients]) -> Coefficients:
    """A generation's hardware coefficients with the new stack's software coefficients."""
    phases = {}
    for phase in PHASES:
        values = dict(zip(COEFFICIENT_NAMES, getattr(hardware, phase).as_array(), strict=True))
        sw = software[phase]
        for name in (*NEW_STACK_SOFTWARE[phase], *NEW_STACK_TIED[phase]):
            values[name] = getattr(sw, name)
        phases[phase] = PhaseCoefficients(**values)
    return Coefficients(**phases, moe_nxd=True)


def hardware_parents(old: dict[str, Coefficients], pooled: Coefficients) -> dict[str, Coefficients]:
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


def fit_generation(rows: Sequence[BenchmarkRow], parent: Coefficients) -> Coefficients:
    """SERVING_FREE fitted on one generation's NxD Inference rows (squared relative error), the rest from `parent`.

    A phase with no free coefficient or without a single measurement keeps the parent's coefficients.
    """
    feats = [row_features(r) for r in rows]
    phases: dict[str, PhaseCoefficients] = {}
    for k, phase in enumerate(PHASES):
        measured = [row_measured_ms(r, phase) for r in rows]
        if not SERVING_FREE[phase] or not any(np.isfinite(m) for m in measured):
            phases[phase] = getattr(parent, phase)
            continue
        fitted = fit_phase(
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


def serving_generations(rows: Sequence[BenchmarkRow]) -> frozenset[str]:
    """Generations whose serving rows cover at least MIN_ARCHITECTURES architectures (fitted on their own)."""
    serving = [r for r in rows if r.new_stack and r.per_generation]
    archs = {(r.generation, architecture(r.model)) for r in serving}
    gens = {gen for gen, _ in archs}
    return frozenset(g for g in gens if sum(gen == g for gen, _ in archs) >= MIN_ARCHITECTURES)


def fit_all(rows: Sequence[BenchmarkRow]) -> dict[str, Coefficients]:
    """Coefficients per calibration group, with the pooled transformers-neuronx set (POOLED_GROUP) beside them."""
    old_rows = [r for r in rows if not r.new_stack and get_instance(r.instance).chip.static_shapes]
    gpu_rows = [r for r in rows if get_instance(r.instance).chip.name in GPU_FIT_CHIPS]
    new_rows = [r for r in rows if r.new_stack and not r.per_generation]
    out: dict[str, Coefficients] = {}
    for gen in sorted({r.generation for r in old_rows}):
        fitted = fit_stacks([r for r in old_rows if r.generation == gen])
        out |= {group_name(gen, st): c for st, c in fitted.items()}
    if old_rows:
        pooled = fit_stacks(old_rows)
        out[POOLED_GROUP] = pooled[newest_stack(pooled)]
    if new_rows:
        parents = hardware_parents(out, out.get(POOLED_GROUP, Coefficients()))
        software = fit_new_stack(new_rows, parents)
        out |= {group_name(gen, NXD_INFERENCE): with_software(hw, software) for gen, hw in parents.items()}
        for gen in sorted(serving_generations(rows)):
            unit = [r for r in rows if r.per_generation and r.new_stack and r.generation == gen]
            out[group_name(gen, NXD_INFERENCE)] = fit_generation(unit, out[group_name(gen, NXD_INFERENCE)])
    for gen in sorted({r.generation for r in gpu_rows}):
        fitted = fit_stacks([r for r in gpu_rows if r.generation == gen], GPU_STACK_SCOPED)
        out |= {group_name(gen, st): c for st, c in fitted.items()}
    return out


def fit_coefficients(rows: Sequence[BenchmarkRow]) -> dict[str, Coefficients]:
    """Coefficients per calibration group (generation/stack).

    transformers-neuronx and GPU engines: each generation fitted on its own rows; NxD Inference: software
    coefficients fitted across generations on the chips' hardware coefficients (see NEW_STACK_SOFTWARE),
    one group per Neuron generation of the catalog, Trainium2/3 included, then refitted (SERVING_FREE) on a
    generation's own serving rows (BenchmarkRow.per_generation) where they cover MIN_ARCHITECTURES architectures.
    """
    return {k: v for k, v in fit_all(rows).items() if k != POOLED_GROUP}
