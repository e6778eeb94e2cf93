"""A replica deployment (model x instance x TP x precision) and the constants the cost model needs."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from switchyard.accelerator.errors import ConfigurationError, DoesNotFitError, UnknownNameError
from switchyard.accelerator.sim.hardware import Instance, Topology, get_instance
from switchyard.accelerator.sim.model_config import ModelConfig, PaddedHeads
from switchyard.accelerator.sim.models import get_model

__all__ = [
    "DEFAULT_ACCEPTANCE_RATE",
    "HBM_USABLE_FRACTION",
    "MAX_SPECULATIVE_TOKENS",
    "Deployment",
    "KvCacheDtype",
    "Precision",
    "Speculation",
    "make_deployment",
]

# Share of device memory the runtime lets weights + KV use (the rest: runtime, activations, scratch).
HBM_USABLE_FRACTION = 0.9
GIB = 1024**3
# A linear-attention state element: FP32, as aws-samples/sample-qwen3.5-qwen3.6-dense-trainium keeps it.
STATE_BYTES = 4.0
# Speculative decoding: the chance that the target accepts one drafted token, when a deployment states none. An
# assumption, not a measurement: no published row of the catalog's pairs gives one (docs/simulator.md).
DEFAULT_ACCEPTANCE_RATE = 0.7
# At most this many drafted tokens a step: each is a draft pass the simulator runs per step (vLLM's drafts propose a
# handful; past a few tokens at any acceptance rate below 1 the expected gain stops growing).
MAX_SPECULATIVE_TOKENS = 32


class Precision(enum.StrEnum):
    """Stored weight type. int8 is weight-only (matmuls run in BF16); fp8 runs at the FP8 rate."""

    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"

    @property
    def bytes(self) -> int:
        return 2 if self is Precision.BF16 else 1


class KvCacheDtype(enum.StrEnum):
    """Element type of the KV cache. FP8 halves its bytes per token: twice the tokens fit, half the KV is read.

    The cost model was calibrated with BF16 caches, so FP8 is an extrapolation through the bytes alone (the
    dequantisation before attention is taken as free).
    """

    BF16 = "bf16"
    FP8 = "fp8"

    @property
    def bytes(self) -> int:
        return 2 if self is KvCacheDtype.BF16 else 1


@dataclass(frozen=True, slots=True)
class Speculation:
    """Speculative decoding with a draft model on the same ranks: each step the draft proposes `tokens` tokens (that
    many decode passes of the draft) and the target checks them in one pass over tokens + 1 query tokens a sequence;
    each drafted token is accepted with probability `acceptance_rate`, independently, until the first rejection."""

    draft: Deployment  # the draft model's own deployment (its weights and KV on the same ranks)
    tokens: int
    acceptance_rate: float

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens a sequence gains per step: the accepted run plus the target's own next token,
        (1 - a^(k+1)) / (1 - a) (Leviathan et al., 2023)."""
        a, k = self.acceptance_rate, self.tokens
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)

    def to_dict(self) -> dict[str, Any]:
        """The speculation as stated, enough to repeat it: the draft, the tokens it proposes per step (vLLM's
        num_speculative_tokens) and the acceptance rate assumed."""
        return {
            "draft_model": self.draft.model.name,
            "num_speculative_tokens": self.tokens,
            "acceptance_rate": self.acceptance_rate,
        }


@dataclass(frozen=True, slots=True)
class Deployment:
    """One replica: a model sharded over `tp` ranks of an instance. Build it with make_deployment()."""

    model: ModelConfig
    instance: Instance
    tp: int
    weights: Precision
    chips: int
    peak_flops: float  # dense matmul rate of the replica at the weight precision's compute type
    hbm_bandwidth_bytes_per_s: float
    heads: int  # query heads after padding to a multiple of tp (Neuron pads, GPUs must divide)
    kv_heads: int  # KV heads after replication so every rank holds at least one
    always_weight_bytes: float  # read on every forward pass
    routed_weight_bytes: float  # MoE experts: read only for the experts a forward touches
    weight_bytes: float  # resident, a draft model's included
    # stored, over every layer with a KV cache of its own (full and sliding-window attention), a draft model's included
    kv_bytes_per_token: float
    # KV bytes a forward pass reads per context token: every attention layer reads the cache it attends over, its own
    # or one it shares with an earlier layer (ModelConfig.kv_shared_layers); kv_bytes_per_token without KV sharing.
    kv_read_bytes_per_token: float
    linear_flops_per_token: float  # matmuls, plus linear-attention layers' recurrences (constant per token)
    attention_flops_per_qk: float  # FLOPs per (query token, key token) pair over all attention layers
    collective_s_per_layer_token: float  # bandwidth part of the per-layer all-reduces, per token
    collective_latency_s_per_layer: float  # latency part of the two all-reduces of one layer
    hbm_bytes: float
    kv_capacity_tokens: int
    expert_parallel: bool = False  # MoE experts whole on ranks, tokens moved by all-to-all
    kv_dtype: KvCacheDtype = KvCacheDtype.BF16
    # Sliding-window layers (ModelConfig.layer_types), or a sparse-attention model's latent attention over its
    # indexer's top-k keys: their share of kv_read_bytes_per_token and of attention_flops_per_qk, which apply to the
    # last `window_tokens` keys of a query only (0: no such layers).
    window_tokens: int = 0
    window_kv_bytes_per_token: float = 0.0
    window_attention_flops_per_qk: float = 0.0
    # Query and KV heads per attention layer type after padding, (layer type, (heads, KV heads)): a model whose layer
    # types have their own heads (ModelConfig.attention_shapes) pads each type's as its own.
    padded_heads: tuple[tuple[str, tuple[int, int]], ...] = ()
    # Linear-attention and Mamba-2 layers' recurrent state, read by every pass that computes the sequence (FP32, as
    # the NxD Inference ports of Gated DeltaNet keep it; granite-4.0-h's port updates its Mamba-2 state in FP32 but
    # keeps it in BF16 between passes, so for it this is twice what it holds).
    state_bytes_per_sequence: float = 0.0
    # Bytes a computed token gathers from a table beside the weights: its row of per-layer input embeddings
    # (ModelConfig.per_layer_input_size; 0 without them). The token embedding's own row is not charged.
    gathered_bytes_per_token: float = 0.0
    # Speculative decoding with a draft model (ModelConfig.draft_model): its deployment, tokens and acceptance rate.
    speculation: Speculation | None = None

    @property
    def chip_name(self) -> str:
        return self.instance.chip.name

    def state_tokens(self, sequences: int) -> int:
        """KV-cache tokens the recurrent state of `sequences` sequences displaces (0 without such layers)."""
        return math.ceil(sequences * self.state_bytes_per_sequence / self.kv_bytes_per_token)


def _allreduce_steps(inst: Instance, chips: int, tp: int) -> int:
    """Latency-bound steps of one all-reduce over `chips` chips of this topology."""
    if chips <= 1:
        return 1 if tp > 1 else 0
    if inst.topology is Topology.SWITCHED:
        return 2  # reduce-scatter + all-gather, one switch traversal each
    if inst.topology is Topology.RING:
        return 2 * (chips - 1)
    # Torus: fill the grid dimension by dimension; a ring per dimension.
    steps, left = 0, chips
    for d in inst.dims:
        used = min(d, left)
        steps += 2 * (used - 1)
        left = math.ceil(left / used)
    return steps


def _alltoall_steps(inst: Instance, chips: int) -> int:
    """Latency-bound steps of one all-to-all: one switch traversal, a ring's n-1, a torus dimension by dimension."""
    if chips <= 1:
        return 0
    if inst.topology is Topology.SWITCHED:
        return 1
    if inst.topology is Topology.RING:
        return chips - 1
    steps, left = 0, chips
    for d in inst.dims:
        used = min(d, left)
        steps += used - 1
        left = math.ceil(left / used)
    return steps


# Width of the NeuronCore's systolic array: a matmul whose sharded output is narrower than this leaves
# columns idle (the same holds for the tensor cores' tiles on a GPU).
PE_COLUMNS = 128


def _shard(heads: int, kv: int, model: ModelConfig, inst: Instance, tp: int) -> tuple[int, int]:
    valid = [t for t in range(1, inst.max_tp + 1) if heads % t == 0 and (kv % t == 0 or t % kv == 0)]
    if inst.chip.static_shapes:
        # NxD Inference pads the query heads to a multiple of TP (with TP above the head count every rank gets
        # one, some of them padding) and replicates KV heads so every rank holds one: Llama 4 (40 heads) at TP64.
        return math.ceil(heads / tp) * tp, max(tp, math.ceil(kv / tp) * tp)
    if heads % tp or (kv % tp and tp % kv):
        raise ConfigurationError(
            f"tp={tp} does not divide the {heads} attention heads / {kv} KV heads of {model.name}; "
            f"valid TP degrees on {inst.name}: {valid}"
        )
    return heads, max(kv, tp)


def _shard_heads(model: ModelConfig, inst: Instance, tp: int) -> tuple[int, int, dict[str, tuple[int, int]]]:
    """The model's own (heads, KV heads) after sharding, and those of each attention layer type."""
    heads, kv = _shard(model.num_heads, model.num_kv_heads, model, inst, tp)
    per_type = {s.kind: _shard(s.heads, s.kv_heads, model, inst, tp) for s in model.attention_shapes()}
    return heads, kv, per_type


def _weight_bytes(m: ModelConfig, padded: PaddedHeads, prec: Precision) -> tuple[float, float, float]:
    """(always-read bytes, routed-expert bytes, total resident bytes) of the sharded weights."""
    always, routed = m.layer_params(padded=padded)
    embed = m.vocab_size * m.hidden_size
    head = m.lm_head_params()
    always_bytes = float((always + head) * prec.bytes)  # LM head read every step; embeddings gathered
    separate_embeddings = not m.tie_word_embeddings or not head  # an embedding model's table is its own
    tables = (embed if separate_embeddings else 0) + m.per_layer_input_params()[1]  # resident, gathered by row
    total = always_bytes + routed * prec.bytes + tables * prec.bytes
    return always_bytes, float(routed * prec.bytes), total


def _fits(m: ModelConfig, inst: Instance, tp: int, prec: Precision) -> bool:
    try:
        _, _, padded = _shard_heads(m, inst, tp)
    except ConfigurationError:
        return False
    hbm = inst.chip.hbm_bytes * tp / inst.chip.ranks_per_chip
    return _weight_bytes(m, padded, prec)[2] < hbm * HBM_USABLE_FRACTION


def make_deployment(
    model: ModelConfig | str,
    instance: Instance | str,
    tp: int,
    weights: Precision | str = Precision.BF16,
    *,
    expert_parallel: bool = False,
    kv_dtype: KvCacheDtype | str = KvCacheDtype.BF16,
    draft_model: ModelConfig | str | None = None,
    num_speculative_tokens: int | None = None,
    acceptance_rate: float | None = None,
) -> Deployment:
    """Validate a deployment and precompute its constants; raises ConfigurationError/DoesNotFitError.

    `expert_parallel` (MoE only) places whole experts on the ranks instead of slicing every expert
    `tp` ways; tokens then travel to their experts and back by two all-to-alls per MoE layer.
    `kv_dtype` is the KV cache's element type (see KvCacheDtype). A model with a draft (`draft_model`) is served
    with speculative decoding (Speculation): the draft on the same ranks, its weights and KV cache beside the
    target's, each drafted token accepted with probability `acceptance_rate` (default DEFAULT_ACCEPTANCE_RATE).
    `draft_model` (a catalog id or a ModelConfig) serves any model with that draft, proposing
    `num_speculative_tokens` tokens a step, as vLLM's speculative_config does; for a target + draft pair of the
    catalog they replace the pair's own draft and tokens.
    """
    m = get_model(model) if isinstance(model, str) else model
    inst = get_instance(instance) if isinstance(instance, str) else instance
    prec = Precision(weights)
    kv_type = KvCacheDtype(kv_dtype)
    if tp < 1 or tp > inst.max_tp:
        raise ConfigurationError(f"tp={tp} outside 1..{inst.max_tp} (ranks of {inst.name})")
    speculation = _speculation(m, inst, tp, prec, kv_type, draft_model, num_speculative_tokens, acceptance_rate)
    chip = inst.chip
    chips = inst.chips_for_tp(tp)
    rank_share = tp / chip.ranks_per_chip  # chips' worth of compute and bandwidth the replica uses
    compute = chip.fp8_flops if prec is Precision.FP8 else chip.bf16_flops
    heads, kv_heads, padded = _shard_heads(m, inst, tp)
    always_bytes, routed_bytes, weight_bytes = _weight_bytes(m, padded, prec)
    always, _ = m.layer_params(padded=padded)
    head = m.lm_head_params()
    kv_per_token = m.kv_elements_per_token(kv_heads, padded=padded) * float(kv_type.bytes)
    if not kv_per_token:
        raise ConfigurationError(f"{m.name} has no layer with a KV cache; the engine allocates KV blocks per token")
    if speculation is not None:  # the draft's weights and its KV of every token sit beside the target's
        weight_bytes += speculation.draft.weight_bytes
        kv_per_token += speculation.draft.kv_bytes_per_token
    hbm = chip.hbm_bytes * rank_share
    free = hbm * HBM_USABLE_FRACTION - weight_bytes
    if free <= 0:
        fitting = [t for t in range(tp + 1, inst.max_tp + 1) if _fits(m, inst, t, prec)]
        hint = (
            f"it needs tp >= {fitting[0]} on {inst.name}"
            if fitting
            else f"it does not fit on one {inst.name} at {prec.value}; use smaller weights or a larger instance"
        )
        raise DoesNotFitError(
            f"{m.name} weights ({weight_bytes / GIB:.1f} GiB at {prec.value}) do not fit in the "
            f"{hbm * HBM_USABLE_FRACTION / GIB:.1f} GiB usable HBM of tp={tp} on {inst.name}: {hint}"
        )
    if expert_parallel and not m.is_moe:
        raise ConfigurationError(f"expert parallelism needs a mixture-of-experts model; {m.name} is dense")
    bw_factor = 2.0 * (chips - 1) / chips if chips > 1 else 0.0
    msg_per_token = m.hidden_size * 2.0  # BF16 activations
    hop_s = inst.hop_latency_us * 1e-6
    allreduce_s = _allreduce_steps(inst, chips, tp) * hop_s
    allreduce_bytes = bw_factor * msg_per_token
    expert_flops = float(m.moe_layers * m.experts_per_token * m.expert_params())
    if expert_parallel:
        # MoE layers: the attention all-reduce, then dispatch + combine all-to-alls of k copies per token.
        a2a_s = _alltoall_steps(inst, chips) * hop_s
        a2a_bytes = m.experts_per_token * msg_per_token * (chips - 1) / chips if chips > 1 else 0.0
        dense = m.num_layers - m.moe_layers
        latency_per_layer = (dense * 2 * allreduce_s + m.moe_layers * (allreduce_s + 2 * a2a_s)) / m.num_layers
        bytes_per_layer = (
            dense * 2 * allreduce_bytes + m.moe_layers * (allreduce_bytes + 2 * a2a_bytes)
        ) / m.num_layers
    else:
        latency_per_layer = 2 * allreduce_s
        bytes_per_layer = 2 * allreduce_bytes
        if m.is_moe and m.moe_intermediate_size / tp < PE_COLUMNS:
            # Every expert sliced tp ways: shards narrower than the PE array waste its columns.
            expert_flops *= PE_COLUMNS * tp / m.moe_intermediate_size
    return Deployment(
        model=m,
        instance=inst,
        tp=tp,
        weights=prec,
        chips=chips,
        peak_flops=compute * rank_share,
        hbm_bandwidth_bytes_per_s=chip.hbm_bandwidth_bytes_per_s * rank_share,
        heads=heads,
        kv_heads=kv_heads,
        padded_heads=tuple(sorted(padded.items())),
        always_weight_bytes=always_bytes,
        routed_weight_bytes=routed_bytes,
        weight_bytes=weight_bytes,
        kv_bytes_per_token=kv_per_token,
        kv_read_bytes_per_token=m.kv_read_elements_per_token(kv_heads, padded=padded) * float(kv_type.bytes),
        linear_flops_per_token=2.0 * (always + head + expert_flops) + m.recurrent_flops_per_token(),
        attention_flops_per_qk=float(m.attention_flops_per_qk(heads, padded=padded)),
        collective_s_per_layer_token=bytes_per_layer / chip.link_bandwidth_bytes_per_s,
        collective_latency_s_per_layer=latency_per_layer,
        hbm_bytes=hbm,
        kv_capacity_tokens=int(free // kv_per_token),
        expert_parallel=expert_parallel,
        kv_dtype=kv_type,
        window_tokens=m.sparse_attention_window,
        window_kv_bytes_per_token=m.window_kv_elements_per_token(kv_heads, padded=padded) * float(kv_type.bytes),
        window_attention_flops_per_qk=float(m.attention_flops_per_qk(heads, padded=padded, window_only=True)),
        state_bytes_per_sequence=m.recurrent_state_elements() * STATE_BYTES,
        gathered_bytes_per_token=float(m.per_layer_input_elements_per_token() * prec.bytes),
        speculation=speculation,
    )


def _speculation(
    m: ModelConfig,
    inst: Instance,
    tp: int,
    prec: Precision,
    kv_type: KvCacheDtype,
    draft_model: ModelConfig | str | None,
    tokens: int | None,
    acceptance_rate: float | None,
) -> Speculation | None:
    """The speculative decoding of a model with a draft, the stated one or a catalog pair's own (None without one);
    the draft's deployment is built alone, on the target's ranks."""
    named = draft_model or m.draft_model
    if not named:
        stated = [
            w for w, v in (("speculative tokens", tokens), ("an acceptance rate", acceptance_rate)) if v is not None
        ]
        if stated:
            raise ConfigurationError(
                f"{m.name} has no draft model: {' and '.join(stated)} apply to a draft's tokens (state a draft model)"
            )
        return None
    k = m.num_speculative_tokens if tokens is None else tokens
    if tokens is None and k == 0:
        raise ConfigurationError(
            f"{m.name}: a draft model needs the number of tokens it proposes a step (vLLM's num_speculative_tokens)"
        )
    if k < 1:
        raise ConfigurationError(f"{m.name}: speculative decoding needs at least one drafted token a step, got {k}")
    if k > MAX_SPECULATIVE_TOKENS:
        raise ConfigurationError(
            f"{m.name}: at most {MAX_SPECULATIVE_TOKENS} drafted tokens a step are simulated, got {k}"
        )
    rate = DEFAULT_ACCEPTANCE_RATE if acceptance_rate is None else acceptance_rate
    if not 0.0 <= rate <= 1.0:
        raise ConfigurationError(f"{m.name}: the acceptance rate of drafted tokens must be in [0, 1], got {rate}")
    try:
        draft = get_model(named) if isinstance(named, str) else named
    except UnknownNameError as exc:
        raise ConfigurationError(f"{m.name}: the draft model: {exc}") from exc
    for role, model in (("target", m), ("draft", draft)):
        if model.is_embedding:
            raise ConfigurationError(f"{m.name}: the {role} {model.name} is an embedding model; it generates no tokens")
    if draft.vocab_size != m.vocab_size:
        raise ConfigurationError(
            f"{m.name}: the draft {draft.name} does not share the target's vocabulary "
            f"({draft.vocab_size} tokens against {m.vocab_size})"
        )
    if draft.draft_model:
        raise ConfigurationError(f"{m.name}: the draft {draft.name} has a draft of its own")
    if draft.sparse_attention_window and draft.sparse_attention_window != m.sparse_attention_window:
        raise ConfigurationError(
            f"{m.name}: the draft {draft.name} attends over a window of {draft.sparse_attention_window} tokens, the "
            f"target over {m.sparse_attention_window or 'its whole context'}: another attention window is not modelled"
        )
    try:
        draft_dep = make_deployment(draft, inst, tp, prec, kv_dtype=kv_type)
    except ConfigurationError as exc:
        raise type(exc)(f"{m.name}: the draft {draft.name} on the target's ranks: {exc}") from exc
    return Speculation(draft_dep, k, rate)
