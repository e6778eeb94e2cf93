"""Switchyard accelerator: hardware/model catalogs, a calibrated cost model and a Trainium fleet simulator.

Layers: catalogs (`get_chip`, `get_instance`, `get_model`, `load_model_config`), the cost model
(`make_deployment`, `forward_time_s`, `simulate_point`, fitted by `calibrate`), and the serving engine
(`Cluster` of `ReplicaEngine`s fed with `Request`s, reporting `FinishedRequest`s with exact `chip_us`).

Two halves: `sim/` is the simulator, whose public names this module exports, and `pool/` serves models on it
or on real upstreams. `errors` is shared by both; `cli` is the `simulate` command group.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # eager for type checkers; at run time each name is imported on first use (``__getattr__``)
    from switchyard.accelerator.errors import ConfigurationError, DoesNotFitError, SimulatorError, UnknownNameError
    from switchyard.accelerator.sim.attribution import attribute_chip_us
    from switchyard.accelerator.sim.calibration import CalibrationResult, calibrate, read_benchmarks
    from switchyard.accelerator.sim.calibration_data import coefficients_for, load_coefficients
    from switchyard.accelerator.sim.cluster import Cluster
    from switchyard.accelerator.sim.costmodel import Coefficients, PhaseCoefficients, forward_time_s
    from switchyard.accelerator.sim.deployment import Deployment, Precision, make_deployment
    from switchyard.accelerator.sim.disaggregated import DisaggregatedCluster
    from switchyard.accelerator.sim.engine import EngineConfig, ReplicaEngine
    from switchyard.accelerator.sim.hardware import (
        Chip,
        Instance,
        Topology,
        get_chip,
        get_instance,
        list_chips,
        list_instances,
    )
    from switchyard.accelerator.sim.metrics import RunSummary, summarize
    from switchyard.accelerator.sim.model_config import ModelConfig
    from switchyard.accelerator.sim.models import get_model, list_models, load_model_config, register_model
    from switchyard.accelerator.sim.point import PointResult, simulate_point
    from switchyard.accelerator.sim.requests import FinishedRequest, Request
    from switchyard.accelerator.sim.router import RoutingPolicy, make_router
    from switchyard.accelerator.sim.workloads import (
        agentic_workload,
        bursty_workload,
        load_azure_trace,
        poisson_workload,
        repeat_workload,
        scale_rate,
    )

_HOMES = {
    "CalibrationResult": "switchyard.accelerator.sim.calibration",
    "Chip": "switchyard.accelerator.sim.hardware",
    "Cluster": "switchyard.accelerator.sim.cluster",
    "Coefficients": "switchyard.accelerator.sim.costmodel",
    "ConfigurationError": "switchyard.accelerator.errors",
    "Deployment": "switchyard.accelerator.sim.deployment",
    "DisaggregatedCluster": "switchyard.accelerator.sim.disaggregated",
    "DoesNotFitError": "switchyard.accelerator.errors",
    "EngineConfig": "switchyard.accelerator.sim.engine",
    "FinishedRequest": "switchyard.accelerator.sim.requests",
    "Instance": "switchyard.accelerator.sim.hardware",
    "ModelConfig": "switchyard.accelerator.sim.model_config",
    "PhaseCoefficients": "switchyard.accelerator.sim.costmodel",
    "PointResult": "switchyard.accelerator.sim.point",
    "Precision": "switchyard.accelerator.sim.deployment",
    "ReplicaEngine": "switchyard.accelerator.sim.engine",
    "Request": "switchyard.accelerator.sim.requests",
    "RoutingPolicy": "switchyard.accelerator.sim.router",
    "RunSummary": "switchyard.accelerator.sim.metrics",
    "SimulatorError": "switchyard.accelerator.errors",
    "Topology": "switchyard.accelerator.sim.hardware",
    "UnknownNameError": "switchyard.accelerator.errors",
    "agentic_workload": "switchyard.accelerator.sim.workloads",
    "attribute_chip_us": "switchyard.accelerator.sim.attribution",
    "bursty_workload": "switchyard.accelerator.sim.workloads",
    "calibrate": "switchyard.accelerator.sim.calibration",
    "coefficients_for": "switchyard.accelerator.sim.calibration_data",
    "forward_time_s": "switchyard.accelerator.sim.costmodel",
    "get_chip": "switchyard.accelerator.sim.hardware",
    "get_instance": "switchyard.accelerator.sim.hardware",
    "get_model": "switchyard.accelerator.sim.models",
    "list_chips": "switchyard.accelerator.sim.hardware",
    "list_instances": "switchyard.accelerator.sim.hardware",
    "list_models": "switchyard.accelerator.sim.models",
    "load_azure_trace": "switchyard.accelerator.sim.workloads",
    "load_coefficients": "switchyard.accelerator.sim.calibration_data",
    "load_model_config": "switchyard.accelerator.sim.models",
    "make_deployment": "switchyard.accelerator.sim.deployment",
    "make_router": "switchyard.accelerator.sim.router",
    "poisson_workload": "switchyard.accelerator.sim.workloads",
    "read_benchmarks": "switchyard.accelerator.sim.calibration",
    "register_model": "switchyard.accelerator.sim.models",
    "repeat_workload": "switchyard.accelerator.sim.workloads",
    "scale_rate": "switchyard.accelerator.sim.workloads",
    "simulate_point": "switchyard.accelerator.sim.point",
    "summarize": "switchyard.accelerator.sim.metrics",
}
"""Where each public name lives: ``import switchyard.accelerator`` alone loads none of them (nor numpy)."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "CalibrationResult",
    "Chip",
    "Cluster",
    "Coefficients",
    "ConfigurationError",
    "Deployment",
    "DisaggregatedCluster",
    "DoesNotFitError",
    "EngineConfig",
    "FinishedRequest",
    "Instance",
    "ModelConfig",
    "PhaseCoefficients",
    "PointResult",
    "Precision",
    "ReplicaEngine",
    "Request",
    "RoutingPolicy",
    "RunSummary",
    "SimulatorError",
    "Topology",
    "UnknownNameError",
    "agentic_workload",
    "attribute_chip_us",
    "bursty_workload",
    "calibrate",
    "coefficients_for",
    "forward_time_s",
    "get_chip",
    "get_instance",
    "get_model",
    "list_chips",
    "list_instances",
    "list_models",
    "load_azure_trace",
    "load_coefficients",
    "load_model_config",
    "make_deployment",
    "make_router",
    "poisson_workload",
    "read_benchmarks",
    "register_model",
    "repeat_workload",
    "scale_rate",
    "simulate_point",
    "summarize",
]
