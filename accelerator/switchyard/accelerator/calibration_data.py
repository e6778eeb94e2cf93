"""The committed calibration output: fitted coefficients per hardware generation and software stack."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from switchyard.accelerator.costmodel import COEFFICIENT_NAMES, Coefficients, PhaseCoefficients
from switchyard.accelerator.hardware import Instance

__all__ = ["POOLED_GROUP", "coefficients_for", "load_coefficients"]

POOLED_GROUP = "pooled"
_DATA_FILE = "data/coefficients.json"


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


def coefficients_for(instance: Instance) -> tuple[str, Coefficients]:
    """(group used, coefficients) for an instance.

    Generations with no published measurements (Trainium2/3, GPUs, CS-3) use the coefficients pooled
    over every calibrated Neuron stack: the physics (peak rates, bandwidths, topology) comes from the
    catalog, only the software efficiencies are transferred.
    """
    table = load_coefficients()
    if instance.calibration_group in table:
        return instance.calibration_group, table[instance.calibration_group]
    if POOLED_GROUP in table:
        return POOLED_GROUP, table[POOLED_GROUP]
    return "default", Coefficients()
