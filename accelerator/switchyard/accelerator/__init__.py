"""Switchyard accelerator: hardware/model catalogs, a calibrated cost model and a Trainium fleet simulator."""

from __future__ import annotations

from switchyard.accelerator.calibration import CalibrationResult, calibrate, read_benchmarks
from switchyard.accelerator.calibration_data import coefficients_for, load_coefficients
from switchyard.accelerator.costmodel import Coefficients, PhaseCoefficients, forward_time_s
from switchyard.accelerator.deployment import Deployment, Precision, make_deployment
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
from switchyard.accelerator.models import ModelConfig, get_model, list_models, load_model_config, register_model
from switchyard.accelerator.point import PointResult, simulate_point

__all__ = [
    "CalibrationResult",
    "Chip",
    "Coefficients",
    "ConfigurationError",
    "Deployment",
    "DoesNotFitError",
    "Instance",
    "ModelConfig",
    "PhaseCoefficients",
    "PointResult",
    "Precision",
    "SimulatorError",
    "Topology",
    "UnknownNameError",
    "calibrate",
    "coefficients_for",
    "forward_time_s",
    "get_chip",
    "get_instance",
    "get_model",
    "list_chips",
    "list_instances",
    "list_models",
    "load_coefficients",
    "load_model_config",
    "make_deployment",
    "read_benchmarks",
    "register_model",
    "simulate_point",
]
