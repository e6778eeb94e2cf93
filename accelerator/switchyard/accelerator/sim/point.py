"""Point mode: static batch, fixed input/output lengths, the published benchmarks' methodology."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from switchyard.accelerator.errors import ConfigurationError, DoesNotFitError
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.costmodel import (
    STEP_ROW,
    Coefficients,
    FloatArray,
    MoeDispatch,
    bucket,
    forward_features,
    windowed,
)
from switchyard.accelerator.sim.deployment import Deployment, Precision, make_deployment
from switchyard.accelerator.sim.hardware import Instance
from switchyard.accelerator.sim.model_config import ModelConfig

__all__ = ["PointResult", "PromptEncoding", "point_features", "prompt_encoding", "simulate_point"]


class PromptEncoding(StrEnum):
    """How a software stack encodes the prompts of a static batch (what the batch's TTFT measures)."""

    BATCHED = "batched"  # one forward pass over every prompt of the batch
    # One pass per prompt, each attending over the whole batch's padded KV cache (other rows masked):
    # per-prompt matmuls, weight reads and layer overheads, but attention work grows with batch^2.
    PER_PROMPT = "per_prompt"


# Stacks whose published batch TTFTs follow PER_PROMPT (found in the calibration data: docs/simulator.md).
_PER_PROMPT_STACKS = frozenset({"transformers-neuronx 2.18.0"})


def prompt_encoding(stack: str | None) -> PromptEncoding:
    """The prompt encoding of a software stack (the newest stacks, and unknown ones, batch their prompts)."""
    return PromptEncoding.PER_PROMPT if stack in _PER_PROMPT_STACKS else PromptEncoding.BATCHED


@dataclass(frozen=True, slots=True)
class PointResult:
    """Latency and throughput of one static batch, plus the chip time it occupied."""

    model: str
    instance: str
    tp: int
    chips: int
    batch: int
    input_len: int
    output_len: int
    weights: str
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    output_tokens_per_s: float
    chip_seconds: float
    coefficients_group: str
    # speculative decoding as served (Speculation.to_dict: draft, tokens a step, acceptance rate); None: none
    speculation: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _decode_positions(input_len: int, output_len: int) -> FloatArray:
    """Context length at each decode step after the first token."""
    return np.arange(input_len + 1, input_len + max(output_len, 1), dtype=np.float64)


def point_features(
    dep: Deployment,
    batch: int,
    input_len: int,
    output_len: int,
    encoding: PromptEncoding = PromptEncoding.BATCHED,
    *,
    compiled_batch: int | None = None,
    host_sampling: bool = False,
    moe_nxd: bool = False,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Cost-model features of (TTFT, median decode step, every decode step) for a static batch.

    On Neuron the prompts are padded to a power-of-two bucket and decode runs a graph padded to the
    batch and context buckets, or to `compiled_batch` when the graph was compiled for a larger batch than
    runs (vLLM's max_num_seqs: the padded rows are computed, read their KV lines and are sampled);
    elsewhere nothing is padded. `encoding` says whether the batch's prompts are encoded in one pass or
    one pass each (see PromptEncoding); `host_sampling` copies each computed row's logits to the host;
    `moe_nxd` runs mixture-of-experts layers as NxD Inference does (Coefficients.moe_nxd).

    With speculative decoding (Deployment.speculation) the draft encodes the prompts too, and a decode step is the
    draft's k decodes plus the target's pass over k + 1 tokens a sequence, per expected token gained
    (Speculation.tokens_per_step): the decode rows are the features of one token's share of a step.
    """
    spec = dep.speculation
    args = (batch, input_len, output_len, encoding)
    kw: dict[str, Any] = {"compiled_batch": compiled_batch, "host_sampling": host_sampling, "moe_nxd": moe_nxd}
    if spec is None:
        return _point_features(dep, *args, **kw)
    ttft, median, steps = _point_features(dep, *args, **kw, queries=spec.tokens + 1)
    draft = [_point_features(spec.draft, batch, input_len + i, output_len, encoding, **kw) for i in range(spec.tokens)]
    per_token = 1.0 / spec.tokens_per_step
    return (
        ttft + draft[0][0],
        (median + sum(d[1] for d in draft)) * per_token,
        (steps + sum(d[2] for d in draft)) * per_token,
    )


def _point_features(
    dep: Deployment,
    batch: int,
    input_len: int,
    output_len: int,
    encoding: PromptEncoding = PromptEncoding.BATCHED,
    *,
    compiled_batch: int | None = None,
    host_sampling: bool = False,
    moe_nxd: bool = False,
    queries: int = 1,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """point_features of one model, its decode passes computing `queries` tokens a sequence (a speculative
    verify: k + 1) that attend over the sequence's context, read once."""
    q = queries
    pm = MoeDispatch.ALL_EXPERTS if moe_nxd else MoeDispatch.ROUTED
    dm = MoeDispatch.SELECTIVE if moe_nxd else MoeDispatch.ROUTED
    static = dep.instance.chip.static_shapes
    window = dep.window_tokens
    vocab = float(dep.model.vocab_size)
    lb = float(bucket(input_len)[()]) if static else float(input_len)
    logits = batch * vocab if host_sampling else 0.0
    # Sliding-window layers: a padded prompt's query attends to at most `window` keys; causally, the first `window`
    # queries see the triangle and the rest a band of `window`.
    band = lb * min(lb, window) if window else lb * lb
    causal_band = (lb * lb / 2.0 if lb <= window else window * lb - window * window / 2.0) if window else lb * lb / 2.0
    if encoding is PromptEncoding.PER_PROMPT:
        ttft = batch * forward_features(
            dep, lb, batch * lb * lb, 0.0, 1.0, logits / batch, moe=pm, window_qk=batch * band, sequences=1.0
        )
        ttft[STEP_ROW] = 1.0  # host/step overhead is paid once for the batch, not per prompt
    elif static:
        ttft = forward_features(
            dep, batch * lb, batch * lb * lb, 0.0, batch, logits, moe=pm, window_qk=batch * band, sequences=batch
        )
    else:
        ttft = forward_features(
            dep, batch * lb, batch * lb * lb / 2.0, 0.0, batch, logits, moe=pm, window_qk=batch * causal_band,
            sequences=batch,
        )  # fmt: skip
    pos = _decode_positions(input_len, output_len)
    if static:
        bb = max(float(bucket(batch, minimum=1)[()]), float(compiled_batch or 0))
        lg = bb * q * vocab if host_sampling else 0.0
        ctx = bucket(pos)
        w_ctx = windowed(ctx, window)
        steps = forward_features(
            dep, bb * q, bb * ctx * q, bb * ctx, 0.0, lg, moe=dm, window_qk=bb * w_ctx * q, window_kv=bb * w_ctx,
            sequences=bb,
        )  # fmt: skip
        mid: FloatArray | float = bucket(input_len + output_len / 2.0)
        w_mid = windowed(mid, window)
        median = forward_features(
            dep, bb * q, bb * mid * q, bb * mid, 0.0, lg, moe=dm, window_qk=bb * w_mid * q, window_kv=bb * w_mid,
            sequences=bb,
        )  # fmt: skip
    else:
        lg = batch * q * vocab if host_sampling else 0.0
        b = float(batch)
        w_pos = windowed(pos, window)
        steps = forward_features(
            dep, b * q, b * pos * q, b * pos, 0.0, lg, moe=dm, window_qk=b * w_pos * q, window_kv=b * w_pos,
            sequences=b,
        )  # fmt: skip
        mid = float(input_len + output_len / 2.0)
        w_mid = windowed(mid, window)
        median = forward_features(
            dep, b * q, b * mid * q, b * mid, 0.0, lg, moe=dm, window_qk=b * w_mid * q, window_kv=b * w_mid,
            sequences=b,
        )  # fmt: skip
    return ttft, median, steps


def simulate_point(
    model: ModelConfig | str,
    instance: Instance | str,
    tp: int,
    batch: int,
    input_len: int,
    output_len: int,
    weights: Precision | str = Precision.BF16,
    coefficients: Coefficients | None = None,
    *,
    expert_parallel: bool = False,
    stack: str | None = None,
    compiled_batch: int | None = None,
    host_sampling: bool = False,
    draft_model: ModelConfig | str | None = None,
    num_speculative_tokens: int | None = None,
    acceptance_rate: float | None = None,
) -> PointResult:
    """Predict TTFT, TPOT (median), throughput and chip-seconds of one static batch.

    `stack` picks a calibrated software stack of the instance's generation (default: the newest).
    `compiled_batch`: the decode graph's batch when larger than the batch's bucket (vLLM's max_num_seqs on
    Neuron); `host_sampling`: logits are sampled on the host CPU instead of on the device; `draft_model`,
    `num_speculative_tokens`, `acceptance_rate`: speculative decoding with a draft model, or a catalog pair's draft
    and tokens replaced (make_deployment).
    """
    if batch < 1 or input_len < 1 or output_len < 1:
        raise ConfigurationError("batch, input_len and output_len must be positive")
    dep = make_deployment(
        model,
        instance,
        tp,
        weights,
        expert_parallel=expert_parallel,
        draft_model=draft_model,
        num_speculative_tokens=num_speculative_tokens,
        acceptance_rate=acceptance_rate,
    )
    need = batch * (input_len + output_len) + dep.state_tokens(batch)
    if dep.instance.chip.static_shapes:
        padded = int(bucket(batch, minimum=1)[()])
        need = int(padded * bucket(input_len + output_len)[()]) + dep.state_tokens(padded)
    if need > dep.kv_capacity_tokens:
        per_sequence = input_len + output_len + dep.state_tokens(1)
        fits = max(0, dep.kv_capacity_tokens // per_sequence)
        raise DoesNotFitError(
            f"batch {batch} x {input_len + output_len} tokens needs a KV cache of {need} tokens but "
            f"tp={tp} on {dep.instance.name} holds {dep.kv_capacity_tokens}: at most batch {fits} fits"
        )
    group, coeffs = coefficients_for(dep.instance, stack) if coefficients is None else ("custom", coefficients)
    ttft_f, median_f, steps_f = point_features(
        dep,
        batch,
        input_len,
        output_len,
        prompt_encoding(stack),
        compiled_batch=compiled_batch,
        host_sampling=host_sampling,
        moe_nxd=coeffs.moe_nxd,
    )
    ttft_s = float(coeffs.prefill.as_array() @ ttft_f)
    c = coeffs.decode.as_array()
    tpot_s = float(c @ median_f)
    decode_s = float(np.sum(np.tensordot(c, steps_f, axes=1))) if output_len > 1 else 0.0
    e2e_s = ttft_s + decode_s
    return PointResult(
        model=dep.model.name,
        instance=dep.instance.name,
        tp=tp,
        chips=dep.chips,
        batch=batch,
        input_len=input_len,
        output_len=output_len,
        weights=dep.weights.value,
        ttft_ms=ttft_s * 1e3,
        tpot_ms=tpot_s * 1e3,
        e2e_ms=e2e_s * 1e3,
        output_tokens_per_s=batch * output_len / e2e_s,
        chip_seconds=dep.chips * e2e_s,
        coefficients_group=group,
        speculation=None if dep.speculation is None else dep.speculation.to_dict(),
    )
