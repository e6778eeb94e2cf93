"""Cost model: the time of one forward pass (engine iteration) of a replica, as a sum of physical terms.

time = step_overhead + layers * layer_overhead + prompts * prompt_overhead
     + matmul FLOPs / (peak * MFU) + attention FLOPs / (peak * MFU_attn)
     + (weights read + KV read) bytes / (HBM bandwidth * MBU)
     + collective_scale * (per-layer all-reduce latency by topology + bytes / link bandwidth)

The terms are added, not overlapped (a conservative serial model); every coefficient multiplies a
physical quantity, so the model is linear in its coefficients and is fitted by bounded least squares.
All functions accept NumPy arrays and broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from switchyard.accelerator.deployment import Deployment

__all__ = [
    "COEFFICIENT_NAMES",
    "STEP_ROW",
    "Coefficients",
    "PhaseCoefficients",
    "bucket",
    "forward_features",
    "forward_time_s",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = float | int | FloatArray | npt.NDArray[np.int64]

MIN_BUCKET = 128


@dataclass(frozen=True, slots=True)
class PhaseCoefficients:
    """Efficiency coefficients of one kind of forward pass (prefill or decode) on one stack."""

    inv_mfu: float = 2.0  # 1 / model-FLOPs utilisation of the matmuls
    inv_mfu_attention: float = 4.0  # 1 / utilisation of attention score/value FLOPs
    inv_mbu: float = 1.5  # 1 / HBM bandwidth utilisation for weights and KV reads
    collective_scale: float = 1.0  # measured / ideal all-reduce time
    layer_overhead_s: float = 50e-6  # per layer per forward (kernel launch, synchronisation)
    step_overhead_s: float = 2e-3  # per forward (host, sampling, scheduling gaps)
    prompt_overhead_s: float = 0.0  # per prompt (or prompt chunk) encoded in the forward

    def as_array(self) -> FloatArray:
        return np.array([getattr(self, f.name) for f in fields(self)], dtype=np.float64)

    @classmethod
    def from_array(cls, values: Any) -> PhaseCoefficients:
        return cls(*(float(v) for v in values))

    def describe(self) -> dict[str, float]:
        """Coefficients in the units people quote (MFU, MBU as fractions; overheads in µs)."""
        return {
            "mfu": 1 / self.inv_mfu,
            "mfu_attention": 1 / self.inv_mfu_attention,
            "mbu": 1 / self.inv_mbu,
            "collective_scale": self.collective_scale,
            "layer_overhead_us": self.layer_overhead_s * 1e6,
            "step_overhead_us": self.step_overhead_s * 1e6,
            "prompt_overhead_us": self.prompt_overhead_s * 1e6,
        }


COEFFICIENT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(PhaseCoefficients))
STEP_ROW = COEFFICIENT_NAMES.index("step_overhead_s")  # the feature row counting forward passes


@dataclass(frozen=True, slots=True)
class Coefficients:
    """Coefficients of one hardware generation + software stack.

    Neuron runs prompt encoding and token generation as separate compiled graphs with different
    kernels (a matrix-matrix prefill, a matrix-vector decode), so each has its own efficiencies.
    """

    prefill: PhaseCoefficients = PhaseCoefficients()
    decode: PhaseCoefficients = PhaseCoefficients()


def bucket(n: ArrayLike, minimum: int = MIN_BUCKET) -> FloatArray:
    """Smallest power of two >= n (and >= minimum): the compiled shape Neuron pads a dimension to."""
    x = np.maximum(np.asarray(n, dtype=np.float64), float(minimum))
    return np.exp2(np.ceil(np.log2(x)))


def forward_features(
    dep: Deployment,
    tokens: ArrayLike,
    attention_qk: ArrayLike,
    kv_read_tokens: ArrayLike,
    prompts: ArrayLike = 0.0,
) -> FloatArray:
    """Physical quantities of one forward pass, shape (7, *broadcast shape), in seconds at 100 % efficiency.

    tokens: query tokens computed (prefill chunk tokens + one per decoding sequence), already padded;
    attention_qk: sum over sequences of query tokens x key tokens attended;
    kv_read_tokens: KV-cache tokens read from HBM (context of the sequences in the pass);
    prompts: prompts (or prompt chunks) encoded in the pass.
    Row i is multiplied by coefficient i of Coefficients.
    """
    t = np.asarray(tokens, dtype=np.float64)
    qk = np.asarray(attention_qk, dtype=np.float64)
    kv = np.asarray(kv_read_tokens, dtype=np.float64)
    t, qk, kv, n = np.broadcast_arrays(t, qk, kv, np.asarray(prompts, dtype=np.float64))
    m = dep.model
    routed = dep.routed_weight_bytes
    if routed:
        # Expected share of experts touched when `t` tokens each pick k of E experts.
        frac = 1.0 - (1.0 - m.experts_per_token / m.num_experts) ** t
        weight_bytes = dep.always_weight_bytes + routed * frac
    else:
        weight_bytes = np.full_like(t, dep.always_weight_bytes)
    matmul = t * dep.linear_flops_per_token / dep.peak_flops
    attention = qk * dep.attention_flops_per_qk / dep.peak_flops
    memory = (weight_bytes + kv * dep.kv_bytes_per_token) / dep.hbm_bandwidth_bytes_per_s
    layers = float(m.num_layers)
    collective = layers * (dep.collective_latency_s_per_layer + t * dep.collective_s_per_layer_token)
    return np.stack([matmul, attention, memory, collective, np.full_like(t, layers), np.ones_like(t), n])


def forward_time_s(
    dep: Deployment,
    coeffs: PhaseCoefficients,
    tokens: ArrayLike,
    attention_qk: ArrayLike,
    kv_read_tokens: ArrayLike,
    prompts: ArrayLike = 0.0,
) -> FloatArray:
    """Seconds one forward pass takes (see forward_features for the arguments)."""
    feats = forward_features(dep, tokens, attention_qk, kv_read_tokens, prompts)
    return np.tensordot(coeffs.as_array(), feats, axes=1)
