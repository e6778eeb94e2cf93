"""Switchyard accelerator: hardware/model catalogs, a calibrated cost model and a Trainium fleet simulator.

Layers: catalogs (`get_chip`, `get_instance`, `get_model`, `load_model_config`), the cost model
(`make_deployment`, `forward_time_s`, `simulate_point`, fitted by `calibrate`), and the serving engine
(`Cluster` of `ReplicaEngine`s fed with `Request`s, reporting `FinishedRequest`s with exact `chip_us`).
"""

from __future__ import annotations

from switchyard.accelerator.attribution import attribute_chip_us
from switchyard.accelerator.calibration import CalibrationResult, calibrate, read_benchmarks
from switchyard.accelerator.calibration_data import coefficients_for, load_coefficients
from switchyard.accelerator.cluster import Cluster
from switchyard.accelerator.costmodel import Coefficients, PhaseCoefficients, forward_time_s
from switchyard.accelerator.deployment import Deployment, Precision, make_deployment
from switchyard.accelerator.disaggregated import DisaggregatedCluster
from switchyard.accelerator.engine import EngineConfig, ReplicaEngine
from switchyard.accelerator.errors import ConfigurationError, DoesNotFitError, SimulatorError, UnknownNameError
from switchyard.accelerator.hardware import (
    Chip,
    Instance,
    Topology,
    get_chip,
    get_instance,
    list_chips,
    list_instances,
)
from switchyard.accelerator.metrics import RunSummary, summarize
from switchyard.accelerator.models import ModelConfig, get_model, list_models, load_model_config, register_model
from switchyard.accelerator.point import PointResult, simulate_point
from switchyard.accelerator.requests import FinishedRequest, Request
from switchyard.accelerator.router import RoutingPolicy, make_router
from switchyard.accelerator.workloads import (
    agentic_workload,
    bursty_workload,
    load_azure_trace,
    poisson_workload,
    repeat_workload,
    scale_rate,
)

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
