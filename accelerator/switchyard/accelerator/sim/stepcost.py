"""Fast scalar form of the cost model for the engine's hot loop, including multi-step decode jumps."""

from __future__ import annotations

import math

import numpy as np

from switchyard.accelerator.sim.costmodel import Coefficients, FloatArray, PhaseCoefficients, all_expert_flops_per_token
from switchyard.accelerator.sim.deployment import Deployment

__all__ = ["StepCost"]


def _pow2_at_least(n: float, minimum: int) -> float:
    return float(max(minimum, 1 << max(0, math.ceil(math.log2(max(n, 1.0))))))


def _windowed_sum(decode_ctx: list[int], j: FloatArray, window: int) -> FloatArray:
    """Sum over sequences of min(context + j, window), for each step j of a decode jump."""
    ctx = np.asarray(decode_ctx, dtype=np.float64)[:, None] + j[None, :]
    out: FloatArray = np.minimum(ctx, float(window)).sum(axis=0)
    return out


class StepCost:
    """Iteration times of one deployment; the same formulas as costmodel.forward_features, unrolled.

    Prefill-carrying iterations use the prefill coefficients, decode-only iterations the decode ones.
    On static-shape hardware (Neuron) prefill tokens and the decode batch/context are padded to
    power-of-two buckets, as the compiled graphs are. On a stack that runs every expert on every prompt
    token (Coefficients.moe_nxd) prefill-carrying iterations pay every expert's FLOPs and weights, and
    decode-only ones load each token's experts, gathered at the decode set's expert_gather_inv_mbu (or run
    every expert once tokens x k reach the experts).
    Sampling is on the device (no host-sampling term).
    """

    def __init__(self, dep: Deployment, coeffs: Coefficients) -> None:
        self.static = dep.instance.chip.static_shapes
        self.chips = dep.chips
        m = dep.model
        self._moe_keep = 1.0 - m.experts_per_token / m.num_experts if m.num_experts else 1.0
        self._routed = dep.routed_weight_bytes
        self._always = dep.always_weight_bytes
        self.kv_bytes_per_token = dep.kv_bytes_per_token  # stored per token
        self._kvb = dep.kv_read_bytes_per_token  # read per context token and pass
        self._nxd = coeffs.moe_nxd and bool(self._routed)
        self._k_over_e = m.experts_per_token / m.num_experts if m.num_experts else 0.0
        every = all_expert_flops_per_token(dep)
        self._p = self._phase(dep, coeffs.prefill, every if self._nxd else None)
        self._d = self._phase(dep, coeffs.decode)
        self._d_every = self._phase(dep, coeffs.decode, every)
        # seconds per expert weight byte a decode gathers token by token, beyond reading it (selective loading)
        self._gather_s_per_byte = coeffs.decode.expert_gather_inv_mbu / dep.hbm_bandwidth_bytes_per_s
        self._per_prompt = coeffs.prefill.prompt_overhead_s
        # Sliding-window layers (Deployment.window_tokens): the seconds their share of the attention FLOPs and KV
        # bytes would take over the keys past the window, taken back from the full-attention charge per phase.
        self.window = dep.window_tokens
        self._wkvb = dep.window_kv_bytes_per_token
        self._w_flops = dep.window_attention_flops_per_qk / dep.peak_flops
        self._w_qk_p, self._w_qk_d = (
            coeffs.prefill.inv_mfu_attention * self._w_flops,
            coeffs.decode.inv_mfu_attention * self._w_flops,
        )
        # linear-attention state read per sequence and pass
        self._state = self.state_bytes_per_sequence = dep.state_bytes_per_sequence
        self._gathered = dep.gathered_bytes_per_token  # per-layer input embeddings gathered per computed token
        # Speculative decoding: the draft's own step costs, its tokens per step and the expected tokens gained per step
        spec = dep.speculation
        self._draft = StepCost(spec.draft, coeffs) if spec is not None else None
        self._drafted = spec.tokens if spec is not None else 0
        self._tokens_per_step = spec.tokens_per_step if spec is not None else 1.0
        self.prefill_s_per_token = self._p[0]  # linear (matmul + collective) seconds of one computed prompt token

    @staticmethod
    def _phase(
        dep: Deployment, c: PhaseCoefficients, flops_per_token: float | None = None
    ) -> tuple[float, float, float, float]:
        layers = dep.model.num_layers
        per_token = (
            c.inv_mfu * (flops_per_token or dep.linear_flops_per_token) / dep.peak_flops
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

    def _weights(self, tokens: float, prefill: bool) -> float:
        if not self._routed:
            return self._always
        if self._nxd:
            return self._always + self._routed * (1.0 if prefill else min(1.0, tokens * self._k_over_e))
        return self._always + self._routed * (1.0 - math.pow(self._moe_keep, tokens))

    def _decode_phase(self, tokens: float) -> tuple[float, float, float, float]:
        return self._d_every if self._nxd and tokens * self._k_over_e >= 1.0 else self._d

    def _gather_s(self, tokens: float) -> float:
        """Seconds a decode of `tokens` spends gathering its experts' weights beyond reading them."""
        if not self._nxd or tokens * self._k_over_e >= 1.0:
            return 0.0
        return self._routed * tokens * self._k_over_e * self._gather_s_per_byte

    def iteration_s(
        self,
        prefill_tokens: int,
        prefill_qk: float,
        prefill_kv: float,
        decode_ctx: list[int],
        prompts: int = 0,
        prefill_window_qk: float | None = None,
        prefill_window_kv: float | None = None,
    ) -> float:
        """Seconds of one iteration: `prompts` prefill chunks (tokens, attention pairs, KV read) plus decodes.

        `prefill_window_qk` and `prefill_window_kv` are the chunks' attention pairs and KV read with each query's keys
        cut to the sliding window (default: the full ones, which overcharges a sliding-window model's prefill).
        """
        b = len(decode_ctx)
        w = self.window
        if b:
            if self.static:
                bb = _pow2_at_least(b, 1)
                ctx = _pow2_at_least(max(decode_ctx), 128)
                dq = bb * ctx
                b_tokens = bb
                dq_w = bb * min(ctx, w) if w else dq
            else:
                dq = float(sum(decode_ctx))
                b_tokens = float(b)
                dq_w = float(sum(min(c, w) for c in decode_ctx)) if w else dq
        else:
            dq, b_tokens, dq_w = 0.0, 0.0, 0.0
        if prefill_tokens:
            pt = _pow2_at_least(prefill_tokens, 128) if self.static else float(prefill_tokens)
            tokens = pt + b_tokens
            per_token, per_qk, per_byte, fixed = self._p
            kv = prefill_kv + dq
            seconds = (
                tokens * per_token
                + (prefill_qk + dq) * per_qk
                + (
                    self._weights(tokens, True)
                    + kv * self._kvb
                    + (prompts + b_tokens) * self._state
                    + tokens * self._gathered
                )
                * per_byte
                + fixed
                + prompts * self._per_prompt
            )
            if w:
                wqk = (prefill_qk if prefill_window_qk is None else prefill_window_qk) + dq_w
                wkv = (prefill_kv if prefill_window_kv is None else prefill_window_kv) + dq_w
                seconds -= (prefill_qk + dq - wqk) * self._w_qk_p + (kv - wkv) * self._wkvb * per_byte
            if self._draft is not None:  # the draft encodes the same prompt chunks (the decodes do not speculate)
                seconds += self._draft.iteration_s(
                    prefill_tokens, prefill_qk, prefill_kv, [], prompts, prefill_window_qk, prefill_window_kv
                )
            return seconds
        if self._draft is None:
            return self._decode_s(dq, b_tokens, dq_w, 1)
        # One speculative step per expected token gained: k draft decodes, then the target over k + 1 query tokens
        drafting = sum(self._draft.iteration_s(0, 0.0, 0.0, [c + i for c in decode_ctx]) for i in range(self._drafted))
        return (drafting + self._decode_s(dq, b_tokens, dq_w, self._drafted + 1)) / self._tokens_per_step

    def _decode_s(self, dq: float, b_tokens: float, dq_w: float, queries: int) -> float:
        """Seconds of a decode-only pass of `queries` query tokens per sequence (a speculative verify: k + 1), each
        attending over its sequence's context; the KV and state are read once per sequence."""
        w = self.window
        tokens = b_tokens * queries
        per_token, per_qk, per_byte, fixed = self._decode_phase(tokens)
        bytes_read = self._weights(tokens, False) + dq * self._kvb + b_tokens * self._state + tokens * self._gathered
        seconds = tokens * per_token + queries * dq * per_qk + bytes_read * per_byte + fixed + self._gather_s(tokens)
        if w:
            seconds -= (dq - dq_w) * (queries * self._w_qk_d + self._wkvb * per_byte)
        return seconds

    def decode_jump_s(self, decode_ctx: list[int], steps: int) -> FloatArray:
        """Cumulative seconds after each of `steps` decode-only iterations (every context grows by 1)."""
        if self._draft is None:
            step = self._decode_steps_s(decode_ctx, steps, 1)
        else:  # the iteration at context c + j drafts at c + j .. c + j + k - 1, then verifies at c + j
            k = self._drafted
            drafted = np.concatenate(([0.0], np.cumsum(self._draft._decode_steps_s(decode_ctx, steps + k - 1, 1))))
            step = (drafted[k : k + steps] - drafted[:steps] + self._decode_steps_s(decode_ctx, steps, k + 1)) / (
                self._tokens_per_step
            )
        out: FloatArray = np.cumsum(np.broadcast_to(step, (steps,)))
        return out

    def _decode_steps_s(self, decode_ctx: list[int], steps: int, queries: int) -> FloatArray | float:
        """Seconds of each of `steps` decode-only passes of `queries` query tokens a sequence, contexts growing by 1."""
        b = len(decode_ctx)
        j = np.arange(steps, dtype=np.float64)
        if self.static:
            bb = _pow2_at_least(b, 1)
            ctx = np.maximum(2.0 ** np.ceil(np.log2(max(decode_ctx) + j)), 128.0)
            dq = bb * ctx
            b_tokens = bb
        else:
            dq = float(sum(decode_ctx)) + b * j
            b_tokens = float(b)
        tokens = b_tokens * queries
        per_token, per_qk, per_byte, fixed = self._decode_phase(tokens)
        weights = self._weights(tokens, False) + b_tokens * self._state + tokens * self._gathered
        step = tokens * per_token + dq * (queries * per_qk + self._kvb * per_byte) + weights * per_byte + fixed
        step = step + self._gather_s(tokens)
        if self.window:
            past_window = dq - (
                bb * np.minimum(ctx, self.window) if self.static else _windowed_sum(decode_ctx, j, self.window)
            )
            step = step - past_window * (queries * self._w_qk_d + self._wkvb * per_byte)
        out: FloatArray | float = step
        return out
