"""The committed calibration output: fitted coefficients per hardware generation and software stack."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from switchyard.accelerator.errors import ConfigurationError, UnknownNameError
from switchyard.accelerator.sim.costmodel import COEFFICIENT_NAMES, Coefficients, PhaseCoefficients
from switchyard.accelerator.sim.hardware import Instance

__all__ = [
    "MOE_NXD_STACKS",
    "NXD_INFERENCE",
    "POOLED_GROUP",
    "canonical_stack",
    "coefficients_for",
    "group_name",
    "host_sampling",
    "load_coefficients",
    "newest_stack",
]

POOLED_GROUP = "pooled"
_DATA_FILE = "data/coefficients.json"

# The 2025-26 Neuron serving stack: NxD Inference under vLLM or TGI (optimum-neuron). The published rows
# name the front end and its options; the kernels that set the costs are NxD Inference's.
NXD_INFERENCE = "NxD Inference"
# Stacks that run mixture-of-experts layers as neuronx-distributed does (costmodel.MoeDispatch: every expert
# on every prompt token in context encoding, selective loading in token generation).
MOE_NXD_STACKS = frozenset({NXD_INFERENCE})
# Release order of the stacks of one hardware family, oldest first (a version number alone cannot order
# transformers-neuronx 2.18 against NxD Inference).
_RELEASE_ORDER = ("transformers-neuronx", NXD_INFERENCE)


def canonical_stack(published: str) -> str:
    """The software stack a published `stack` column describes, without its front end and options.

    "optimum-neuron vllm (NxD Inference) on-device sampling guidellm sync" and "optimum-neuron TGI guidellm
    sync" are NxD Inference; transformers-neuronx keeps its version; a GPU engine keeps its name without
    the version ("LMDeploy TurboMind v0.1.0a1" -> "LMDeploy TurboMind").
    """
    if "NxD Inference" in published or "optimum-neuron" in published:
        return NXD_INFERENCE
    if published.startswith("transformers-neuronx") or not published:
        return published
    return re.split(r"\s+(?:v?\d|\()", published, maxsplit=1)[0]


def host_sampling(published: str) -> bool:
    """Whether a published stack samples on the host CPU (the stack name says "CPU sampling")."""
    return "cpu sampling" in published.lower()


def group_name(generation: str, stack: str) -> str:
    """Key of a calibration group: "trn1/transformers-neuronx 2.18.1" (just the generation if no stack)."""
    return f"{generation}/{stack}" if stack else generation


def _version(stack: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", stack))


def _release(stack: str) -> int:
    return next((i for i, prefix in enumerate(_RELEASE_ORDER) if stack.startswith(prefix)), -1)


def newest_stack(stacks: Iterable[str]) -> str:
    """The newest stack: NxD Inference over transformers-neuronx, then the highest version number."""
    return max(stacks, key=lambda s: (_release(s), _version(s), s))


@cache
def _packaged() -> dict[str, Any]:
    res = resources.files("switchyard.accelerator.sim").joinpath(_DATA_FILE)
    if not res.is_file():
        return {"groups": {}}
    data: dict[str, Any] = json.loads(res.read_text("utf-8"))
    return data


def load_coefficients(path: str | Path | None = None) -> dict[str, Coefficients]:
    """Coefficients by calibration group, from `path` or from the packaged calibration file."""
    raw = json.loads(Path(path).read_text("utf-8")) if path is not None else _packaged()
    out: dict[str, Coefficients] = {}
    for group, entry in raw.get("groups", {}).items():
        phases = {
            phase: PhaseCoefficients(**{k: float(entry[phase].get(k, 0.0)) for k in COEFFICIENT_NAMES})
            for phase in ("prefill", "decode")
        }
        stack = group.partition("/")[2]
        out[group] = Coefficients(**phases, moe_nxd=stack in MOE_NXD_STACKS)
    return out


def coefficients_for(instance: Instance, stack: str | None = None) -> tuple[str, Coefficients]:
    """(group used, coefficients) for an instance, on `stack` or on the newest calibrated stack.

    The group is reported as the bare generation (e.g. "trn1") when its newest stack is used; a stack
    the generation was not calibrated on is an error.
    Generations with no published measurements (Trainium2/3, GPUs, CS-3) use the coefficients pooled
    over every calibrated Neuron generation: the physics (peak rates, bandwidths, topology) comes from
    the catalog, only the software efficiencies are transferred.
    """
    table = load_coefficients()
    gen = instance.calibration_group
    stacks = {k.partition("/")[2]: k for k in table if k.partition("/")[0] == gen}
    if stack is not None:
        if not stacks:
            raise ConfigurationError(f"{instance.name} has no calibrated software stacks (it uses the pooled set)")
        if stack not in stacks:
            raise UnknownNameError(f"software stack of {gen}", stack, stacks)
        return stacks[stack], table[stacks[stack]]
    if stacks:
        return gen, table[stacks[newest_stack(stacks)]]
    if POOLED_GROUP in table:
        return POOLED_GROUP, table[POOLED_GROUP]
    return "default", Coefficients()
