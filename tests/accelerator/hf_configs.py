"""Hugging Face `config.json` dictionaries of small made-up models that the tests of layer types and shapes build on,
and the time of one decode step of such a model."""

from __future__ import annotations

from typing import Any

from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.hf_config import from_hf_config
from switchyard.accelerator.sim.stepcost import StepCost


def step_s(cfg: dict[str, Any], contexts: list[int], instance: str, tp: int) -> float:
    """Seconds of one decode step of sequences at ``contexts``, the model of ``cfg`` on ``instance`` at ``tp``."""
    dep = make_deployment(from_hf_config("m", cfg), instance, tp)
    _, coeffs = coefficients_for(dep.instance)
    return StepCost(dep, coeffs).iteration_s(0, 0.0, 0.0, contexts)


# Llama 3.1 8B's shape: 32 layers of full attention, 32 query heads and 8 KV heads of 128
DENSE: dict[str, Any] = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}
# The same, with its layers alternating sliding-window (1,024 tokens) and full attention
SLIDING: dict[str, Any] = DENSE | {"layer_types": ["sliding_attention", "full_attention"] * 16, "sliding_window": 1024}
