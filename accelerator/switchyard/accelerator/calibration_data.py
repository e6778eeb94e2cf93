"""The committed calibration output: fitted coefficients per hardware generation and software stack."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from switchyard.accelerator.costmodel import COEFFICIENT_NAMES, Coefficients, PhaseCoefficients
from switchyard.accelerator.errors import ConfigurationError, UnknownNameError
from switchyard.accelerator.hardware import Instance

__all__ = ["POOLED_GROUP", "coefficients_for", "group_name", "load_coefficients", "newest_stack"]

POOLED_GROUP = "pooled"
_DATA_FILE = "data/coefficients.json"


def group_name(generation: str, stack: str) -> str:
    """Key of a calibration group: "trn1/transformers-neuronx 2.18.1" (just the generation if no stack)."""
    return f"{generation}/{stack}" if stack else generation


def _version(stack: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", stack))


def newest_stack(stacks: Iterable[str]) -> str:
    """The stack with the highest version number ("transformers-neuronx 2.18.1" over "... 2.18.0")."""
    return max(stacks, key=lambda s: (_version(s), s))


@cache
def _packaged() -> dict[str, Any]:
    res = resources.files("switchyard.accelerator").joinpath(_DATA_FILE)
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
            phase: PhaseCoefficients(**{k: float(entry[phase][k]) for k in COEFFICIENT_NAMES})
            for phase in ("prefill", "decode")
        }
        out[group] = Coefficients(**phases)
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
