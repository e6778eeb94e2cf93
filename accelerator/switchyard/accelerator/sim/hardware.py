"""Hardware catalog: accelerator chips and the instances (servers, UltraServers) built from them."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

from switchyard.accelerator.errors import UnknownNameError

__all__ = ["Chip", "Instance", "Topology", "get_chip", "get_instance", "list_chips", "list_instances"]


class Topology(enum.StrEnum):
    """How the chips of one instance are wired together."""

    RING = "ring"
    TORUS2D = "torus2d"
    TORUS3D = "torus3d"
    SWITCHED = "switched"


@dataclass(frozen=True, slots=True)
class Chip:
    """One accelerator device. Rates are dense peaks; memory figures are per device."""

    name: str
    family: str  # "neuron", "gpu" or "wafer": decides static-shape bucketing and head padding
    neuron_core_version: int
    bf16_flops: float
    fp8_flops: float
    int8_ops: float
    hbm_bytes: int
    hbm_bandwidth_bytes_per_s: float
    neuron_cores: int
    lnc: int  # physical cores per logical core (rank) under the default Neuron configuration
    sram_bytes: int
    link_bandwidth_bytes_per_s: float
    source: str
    estimates: tuple[str, ...]

    @property
    def ranks_per_chip(self) -> int:
        """Tensor-parallel ranks one chip holds (NeuronCores / LNC on Neuron, 1 on a GPU)."""
        return max(1, self.neuron_cores // self.lnc) if self.family == "neuron" else 1

    @property
    def static_shapes(self) -> bool:
        """Neuron compiles graphs ahead of time for fixed shapes, so work is padded to buckets."""
        return self.family == "neuron"


@dataclass(frozen=True, slots=True)
class Instance:
    """A purchasable unit of chips sharing one interconnect."""

    name: str
    chip: Chip
    chips: int
    topology: Topology
    dims: tuple[int, ...]
    hop_latency_us: float
    network_gbps: float
    price_usd_per_hour: Decimal | None
    calibration_group: str
    source: str
    estimates: tuple[str, ...]

    @property
    def max_tp(self) -> int:
        """Largest tensor-parallel degree (in ranks) the instance supports."""
        return self.chips * self.chip.ranks_per_chip

    def chips_for_tp(self, tp: int) -> int:
        """Chips a replica of `tp` ranks occupies."""
        return max(1, math.ceil(tp / self.chip.ranks_per_chip))

    def price_per_chip_hour(self) -> Decimal | None:
        """Instance price divided evenly over its chips, if a price is known."""
        return None if self.price_usd_per_hour is None else self.price_usd_per_hour / self.chips


def _load() -> tuple[dict[str, Chip], dict[str, Instance]]:
    raw: dict[str, Any] = json.loads(
        resources.files("switchyard.accelerator.sim").joinpath("data/hardware.json").read_text("utf-8")
    )
    chips: dict[str, Chip] = {}
    for c in raw["chips"]:
        fields = {k: v for k, v in c.items() if k != "estimates"}
        chips[c["name"]] = Chip(
            **{**fields, "hbm_bytes": int(c["hbm_bytes"]), "sram_bytes": int(c["sram_bytes"])},
            estimates=tuple(c.get("estimates", ())),
        )
    instances: dict[str, Instance] = {}
    for i in raw["instances"]:
        price = i["price_usd_per_hour"]
        instances[i["name"]] = Instance(
            name=i["name"],
            chip=chips[i["chip"]],
            chips=int(i["chips"]),
            topology=Topology(i["topology"]),
            dims=tuple(int(d) for d in i["dims"]),
            hop_latency_us=float(i["hop_latency_us"]),
            network_gbps=float(i["network_gbps"]),
            price_usd_per_hour=None if price is None else Decimal(price),
            calibration_group=i["calibration_group"],
            source=i["source"],
            estimates=tuple(i.get("estimates", ())),
        )
    return chips, instances


@cache
def _catalog() -> tuple[dict[str, Chip], dict[str, Instance]]:
    return _load()


def get_chip(name: str) -> Chip:
    """The chip called `name` (e.g. "Trainium2"); raises UnknownNameError with close matches."""
    chips = _catalog()[0]
    if name not in chips:
        raise UnknownNameError("chip", name, chips)
    return chips[name]


def get_instance(name: str) -> Instance:
    """The instance type called `name` as AWS spells it (e.g. "trn2.48xlarge")."""
    instances = _catalog()[1]
    if name not in instances:
        raise UnknownNameError("instance", name, instances)
    return instances[name]


def list_chips() -> list[Chip]:
    """Every chip in the catalog."""
    return list(_catalog()[0].values())


def list_instances() -> list[Instance]:
    """Every instance type in the catalog."""
    return list(_catalog()[1].values())
