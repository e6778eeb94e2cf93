"""Cost model: the time of one forward pass (engine iteration) of a replica, as a sum of physical terms.

time = step_overhead + layers * layer_overhead + prompts * prompt_overhead
     + matmul FLOPs / (peak * MFU) + attention FLOPs / (peak * MFU_attn)
     + (weights read + KV read) bytes / (HBM bandwidth * MBU)
     + collective_scale * (per-layer all-reduce latency by topology + bytes / link bandwidth)
     + logits sampled on the host * host_sampling_s_per_logit
     + expert weight bytes gathered token by token / HBM bandwidth * expert_gather_inv_mbu

The terms are added, not overlapped (a conservative serial model); every coefficient multiplies a
physical quantity, so the model is linear in its coefficients and is fitted by bounded least squares.
All functions accept NumPy arrays and broadcast.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from switchyard.accelerator.sim.deployment import Deployment

__all__ = [
    "COEFFICIENT_NAMES",
    "STEP_ROW",
    "Coefficients",
    "MoeDispatch",
    "PhaseCoefficients",
    "all_expert_flops_per_token",
    "bucket",
    "forward_features",
    "forward_time_s",
    "windowed",
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
    # per logit copied to the host and sampled there (0 logits when the stack samples on the device)
    host_sampling_s_per_logit: float = 0.0
    # Added to inv_mbu for the expert weights NxD Inference's decode loads token by token (selective loading:
    # a gather indexed by the router's choice, not a streaming read of whole tensors); 0 elsewhere.
    expert_gather_inv_mbu: float = 0.0

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
            "host_sampling_ns_per_logit": self.host_sampling_s_per_logit * 1e9,
            "mbu_expert_gather": 1 / (self.inv_mbu + self.expert_gather_inv_mbu),
        }


COEFFICIENT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(PhaseCoefficients))
STEP_ROW = COEFFICIENT_NAMES.index("step_overhead_s")  # the feature row counting forward passes
SAMPLING_ROW = COEFFICIENT_NAMES.index("host_sampling_s_per_logit")


@dataclass(frozen=True, slots=True)
class Coefficients:
    """Coefficients of one hardware generation + software stack.

    Neuron runs prompt encoding and token generation as separate compiled graphs with different
    kernels (a matrix-matrix prefill, a matrix-vector decode), so each has its own efficiencies.
    """

    prefill: PhaseCoefficients = PhaseCoefficients()
    decode: PhaseCoefficients = PhaseCoefficients()
    # Mixture-of-experts execution of NxD Inference: prefill runs every expert on every token, decode loads
    # each token's experts (selective loading) or runs every expert (see MoeDispatch). Otherwise every
    # pass computes only the tokens' own experts and reads the experts they touch.
    moe_nxd: bool = False

    def moe_dispatch(self, phase: str) -> MoeDispatch:
        """How mixture-of-experts layers run in a "prefill" or "decode" pass of this stack."""
        if not self.moe_nxd:
            return MoeDispatch.ROUTED
        return MoeDispatch.ALL_EXPERTS if phase == "prefill" else MoeDispatch.SELECTIVE


class MoeDispatch(enum.StrEnum):
    """How a pass executes mixture-of-experts layers (what its FLOPs and weight reads count)."""

    # Each token's k experts are computed; the weights of the distinct experts the tokens touch are read.
    ROUTED = "routed"
    # Every expert computes every token and every expert's weights are read: neuronx-distributed's
    # ExpertMLPs in inference with capacity_factor=None (no dropped tokens) runs forward_all_experts for
    # context encoding (modules/moe/expert_mlps.py); dropless MoE prefill without a grouped kernel.
    ALL_EXPERTS = "all_experts"
    # Token generation: while tokens x k / experts < 1 (DEFAULT_SELECTIVE_LOADING_THRESHOLD) each token
    # loads its own k experts (tokens x k expert weights read, repeats included, by a gather the
    # expert_gather_inv_mbu coefficient charges), else every expert runs.
    SELECTIVE = "selective"


def windowed(context: ArrayLike, window: int) -> FloatArray:
    """Keys a query attends to in a sliding-window layer: the context, cut to the window (0: no window)."""
    c = np.asarray(context, dtype=np.float64)
    out: FloatArray = np.minimum(c, float(window)) if window else c
    return out


def bucket(n: ArrayLike, minimum: int = MIN_BUCKET) -> FloatArray:
    """Smallest power of two >= n (and >= minimum): the compiled shape Neuron pads a dimension to."""
    x = np.maximum(np.asarray(n, dtype=np.float64), float(minimum))
    return np.exp2(np.ceil(np.log2(x)))


def all_expert_flops_per_token(dep: Deployment) -> float:
    """Matmul FLOPs per token when every routed expert processes every token (dense MoE compute).

    The extra experts are charged like the active ones (including the idle PE columns of slices narrower
    than the array, which the deployment already applies to its active experts).
    """
    m = dep.model
    if not m.is_moe or not m.experts_per_token:
        return dep.linear_flops_per_token
    active = float(m.moe_layers * m.experts_per_token * m.expert_params())
    always, _ = m.layer_params(dep.heads, dep.kv_heads, padded=dict(dep.padded_heads) or None)
    dense = float(always + m.lm_head_params())
    factor = (dep.linear_flops_per_token / 2.0 - dense) / active  # idle-column factor of the deployment
    return 2.0 * (dense + factor * active * m.num_experts / m.experts_per_token)


def forward_features(
    dep: Deployment,
    tokens: ArrayLike,
    attention_qk: ArrayLike,
    kv_read_tokens: ArrayLike,
    prompts: ArrayLike = 0.0,
    host_logits: ArrayLike = 0.0,
    *,
    moe: MoeDispatch = MoeDispatch.ROUTED,
    window_qk: ArrayLike | None = None,
    window_kv: ArrayLike | None = None,
    sequences: ArrayLike = 0.0,
) -> FloatArray:
    """Physical quantities of one forward pass, shape (9, *broadcast shape), in seconds at 100 % efficiency.

    tokens: query tokens computed (prefill chunk tokens + one per decoding sequence), already padded;
    attention_qk: sum over sequences of query tokens x key tokens attended;
    kv_read_tokens: KV-cache tokens read from HBM (context of the sequences in the pass);
    prompts: prompts (or prompt chunks) encoded in the pass;
    host_logits: logits copied to the host and sampled there (0 when sampling runs on the device);
    moe: how mixture-of-experts layers run (MoeDispatch);
    window_qk, window_kv: attention_qk and kv_read_tokens with each query's keys cut to the deployment's sliding
    window (what its sliding-window layers compute and read; default: the same as the full layers');
    sequences: sequences whose linear-attention state the pass reads (prompts encoded plus sequences decoded).
    Row i is multiplied by coefficient i of Coefficients.
    """
    t = np.asarray(tokens, dtype=np.float64)
    qk = np.asarray(attention_qk, dtype=np.float64)
    kv = np.asarray(kv_read_tokens, dtype=np.float64)
    wqk = qk if window_qk is None else np.asarray(window_qk, dtype=np.float64)
    wkv = kv if window_kv is None else np.asarray(window_kv, dtype=np.float64)
    t, qk, kv, n, lg, wqk, wkv, seqs = np.broadcast_arrays(
        t,
        qk,
        kv,
        np.asarray(prompts, dtype=np.float64),
        np.asarray(host_logits, dtype=np.float64),
        wqk,
        wkv,
        np.asarray(sequences, dtype=np.float64),
    )
    m = dep.model
    routed = dep.routed_weight_bytes
    flops_per_token: FloatArray | float = dep.linear_flops_per_token
    gathered: FloatArray | float = 0.0  # expert weight bytes loaded token by token (selective loading)
    if routed:
        k_over_e = m.experts_per_token / m.num_experts
        if moe is MoeDispatch.ALL_EXPERTS:
            frac: FloatArray | float = 1.0
            flops_per_token = all_expert_flops_per_token(dep)
        elif moe is MoeDispatch.SELECTIVE:
            load = t * k_over_e
            frac = np.minimum(load, 1.0)
            flops_per_token = np.where(load >= 1.0, all_expert_flops_per_token(dep), dep.linear_flops_per_token)
            gathered = np.where(load >= 1.0, 0.0, routed * frac)
        else:
            # Expected share of experts touched when `t` tokens each pick k of E experts.
            frac = 1.0 - (1.0 - k_over_e) ** t
        weight_bytes = dep.always_weight_bytes + routed * frac
    else:
        weight_bytes = np.full_like(t, dep.always_weight_bytes)
    matmul = t * flops_per_token / dep.peak_flops
    full_qk, full_kv = (
        dep.attention_flops_per_qk - dep.window_attention_flops_per_qk,
        dep.kv_read_bytes_per_token - dep.window_kv_bytes_per_token,
    )
    attention = (qk * full_qk + wqk * dep.window_attention_flops_per_qk) / dep.peak_flops
    kv_bytes = kv * full_kv + wkv * dep.window_kv_bytes_per_token + seqs * dep.state_bytes_per_sequence
    memory = (weight_bytes + kv_bytes + t * dep.gathered_bytes_per_token) / dep.hbm_bandwidth_bytes_per_s
    layers = float(m.num_layers)
    collective = layers * (dep.collective_latency_s_per_layer + t * dep.collective_s_per_layer_token)
    gather = np.broadcast_to(np.asarray(gathered, dtype=np.float64) / dep.hbm_bandwidth_bytes_per_s, t.shape)
    return np.stack([matmul, attention, memory, collective, np.full_like(t, layers), np.ones_like(t), n, lg, gather])


def forward_time_s(
    dep: Deployment,
    coeffs: PhaseCoefficients,
    tokens: ArrayLike,
    attention_qk: ArrayLike,
    kv_read_tokens: ArrayLike,
    prompts: ArrayLike = 0.0,
    host_logits: ArrayLike = 0.0,
    *,
    moe: MoeDispatch = MoeDispatch.ROUTED,
    window_qk: ArrayLike | None = None,
    window_kv: ArrayLike | None = None,
    sequences: ArrayLike = 0.0,
) -> FloatArray:
    """Seconds one forward pass takes (see forward_features for the arguments)."""
    feats = forward_features(
        dep,
        tokens,
        attention_qk,
        kv_read_tokens,
        prompts,
        host_logits,
        moe=moe,
        window_qk=window_qk,
        window_kv=window_kv,
        sequences=sequences,
    )
    return np.tensordot(coeffs.as_array(), feats, axes=1)
