"""Fast scalar form of the cost model for the engine's hot loop, including multi-step decode jumps."""

from __future__ import annotations

import math

import numpy as np

from switchyard.accelerator.costmodel import Coefficients, FloatArray, PhaseCoefficients
from switchyard.accelerator.deployment import Deployment

__all__ = ["StepCost"]


def _pow2_at_least(n: float, minimum: int) -> float:
    return float(max(minimum, 1 << max(0, math.ceil(math.log2(max(n, 1.0))))))


class StepCost:
    """Iteration times of one deployment; the same formulas as costmodel.forward_features, unrolled.

    Prefill-carrying iterations use the prefill coefficients, decode-only iterations the decode ones.
    On static-shape hardware (Neuron) prefill tokens and the decode batch/context are padded to
    power-of-two buckets, as the compiled graphs are.
    """

    def __init__(self, dep: Deployment, coeffs: Coefficients) -> None:
        self.static = dep.instance.chip.static_shapes
        self.chips = dep.chips
        m = dep.model
        self._moe_keep = 1.0 - m.experts_per_token / m.num_experts if m.num_experts else 1.0
        self._routed = dep.routed_weight_bytes
        self._always = dep.always_weight_bytes
        self._kvb = dep.kv_bytes_per_token
        self._p = self._phase(dep, coeffs.prefill)
        self._d = self._phase(dep, coeffs.decode)
        self._per_prompt = coeffs.prefill.prompt_overhead_s

    @staticmethod
    def _phase(dep: Deployment, c: PhaseCoefficients) -> tuple[float, float, float, float]:
        layers = dep.model.num_layers
        per_token = (
            c.inv_mfu * dep.linear_flops_per_token / dep.peak_flops
            + c.collective_scale * layers * dep.collective_s_per_layer_token
        )
        per_qk = c.inv_mfu_attention * dep.attention_flops_per_qk / dep.peak_flops
        per_byte = c.inv_mbu / dep.hbm_bandwidth_bytes_per_s
        fixed = (
            c.collective_scale * layers * dep.collective_latency_s_per_layer
            + c.layer_overhead_s * layers
            + c.step_overhead_s
        )
        return per_token, per_qk, per_byte, fixed

    def _weights(self, tokens: float) -> float:
        if not self._routed:
            return self._always
        return self._always + self._routed * (1.0 - math.pow(self._moe_keep, tokens))

    def iteration_s(
        self, prefill_tokens: int, prefill_qk: float, prefill_kv: float, decode_ctx: list[int], prompts: int = 0
    ) -> float:
        """Seconds of one iteration: `prompts` prefill chunks (tokens, attention pairs, KV read) plus decodes."""
        b = len(decode_ctx)
        if b:
            if self.static:
                bb = _pow2_at_least(b, 1)
                ctx = _pow2_at_least(max(decode_ctx), 128)
                dq = bb * ctx
                b_tokens = bb
            else:
                dq = float(sum(decode_ctx))
                b_tokens = float(b)
        else:
            dq, b_tokens = 0.0, 0.0
        if prefill_tokens:
            pt = _pow2_at_least(prefill_tokens, 128) if self.static else float(prefill_tokens)
            tokens = pt + b_tokens
            per_token, per_qk, per_byte, fixed = self._p
            kv = prefill_kv + dq
            return (
                tokens * per_token
                + (prefill_qk + dq) * per_qk
                + (self._weights(tokens) + kv * self._kvb) * per_byte
                + fixed
                + prompts * self._per_prompt
            )
        per_token, per_qk, per_byte, fixed = self._d
        return b_tokens * per_token + dq * per_qk + (self._weights(b_tokens) + dq * self._kvb) * per_byte + fixed

    def decode_jump_s(self, decode_ctx: list[int], steps: int) -> FloatArray:
        """Cumulative seconds after each of `steps` decode-only iterations (every context grows by 1)."""
        b = len(decode_ctx)
        j = np.arange(steps, dtype=np.float64)
        per_token, per_qk, per_byte, fixed = self._d
        if self.static:
            bb = _pow2_at_least(b, 1)
            ctx = np.maximum(2.0 ** np.ceil(np.log2(max(decode_ctx) + j)), 128.0)
            dq = bb * ctx
            b_tokens = bb
        else:
            dq = float(sum(decode_ctx)) + b * j
            b_tokens = float(b)
        step = b_tokens * per_token + dq * (per_qk + self._kvb * per_byte) + self._weights(b_tokens) * per_byte + fixed
        out: FloatArray = np.cumsum(np.broadcast_to(step, j.shape))
        return out
