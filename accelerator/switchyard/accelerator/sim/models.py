"""Model catalog: transformer architectures described by Hugging Face `config.json` fields."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from switchyard.accelerator.errors import ConfigurationError, UnknownNameError

__all__ = [
    "AttentionShape",
    "ModelConfig",
    "get_model",
    "list_models",
    "load_model_config",
    "model_aliases",
    "register_model",
]

# Query and KV heads per attention layer type after a deployment's padding: layer type -> (heads, kv_heads).
PaddedHeads = Mapping[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class AttentionShape:
    """The softmax-attention layers of one type (full or sliding-window) and their projections' shape."""

    kind: str
    layers: int
    heads: int
    kv_heads: int
    qk_dim: int  # width of a query and key head
    v_dim: int  # width of a value head (the attention output per head)
    k_eq_v: bool = False  # one projection and one cached tensor serve as both K and V (Gemma 4's global layers)

    def params(self, hidden: int, output_gate: bool, heads: int | None = None, kv_heads: int | None = None) -> int:
        """Parameters of one such layer's attention: q, k, v (none when k_eq_v), o and an optional output gate."""
        h = self.heads if heads is None else heads
        kv = self.kv_heads if kv_heads is None else kv_heads
        q = hidden * h * self.qk_dim
        out = h * self.v_dim * hidden * (2 if output_gate else 1)  # the gate is as wide as the attention output
        k_and_v = hidden * kv * (self.qk_dim if self.k_eq_v else self.qk_dim + self.v_dim)
        return q + out + k_and_v

    def kv_elements(self, kv_heads: int | None = None) -> int:
        """KV-cache elements one token stores in one such layer."""
        kv = self.kv_heads if kv_heads is None else kv_heads
        return kv * (self.qk_dim if self.k_eq_v else self.qk_dim + self.v_dim)

    def flops_per_qk(self, heads: int | None = None) -> int:
        """FLOPs per (query, key) pair in one such layer: q.k per head, then the value sum (2 per multiply-add)."""
        h = self.heads if heads is None else heads
        return 2 * h * (self.qk_dim + self.v_dim)


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """The shape of a transformer, enough to count its FLOPs and bytes: a decoder-only language model, or an
    embedding model (``pooling`` set) whose pooled hidden states are the vector, with no LM head."""

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width
    vocab_size: int
    max_position_embeddings: int
    num_experts: int = 0  # routed experts per MoE layer (0: dense model)
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate_size: int = 0
    moe_layers: int = 0  # how many layers are MoE
    kv_lora_rank: int = 0  # > 0: multi-head latent attention (DeepSeek)
    q_lora_rank: int = 0
    rope_head_dim: int = 0
    v_head_dim: int = 0
    tie_word_embeddings: bool = False
    source: str = ""
    encoder: bool = False  # a BERT-family encoder: bidirectional attention, a plain two-matrix MLP
    pooling: str = ""  # embedding models: "cls" (first token) or "last_token"; "" for a language model
    gated_mlp: bool = True  # gate, up and down projections (Llama); False: up and down only (BERT, GPT-J)
    # Per-layer attention (Hugging Face `layer_types`): "full_attention", "sliding_attention" (attends to the last
    # `sliding_window` tokens only), "linear_attention" (a Gated DeltaNet layer: a recurrent state of constant size
    # per sequence instead of a KV cache) or "mamba" (a Mamba-2 layer: likewise a state, no KV cache). Empty: every
    # layer is full attention.
    layer_types: tuple[str, ...] = ()
    sliding_window: int = 0
    # Gated DeltaNet (Qwen3-Next, Qwen3.5/3.6) linear-attention layers: key/value heads and their widths, and the
    # causal convolution's kernel over the projected q, k and v.
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    attn_output_gate: bool = False  # q_proj also projects a sigmoid gate on the attention output (Qwen3.5)
    # Mamba-2 layers (GraniteMoeHybrid's mamba_* fields): heads of `mamba_head_dim` channels (together the inner
    # width, mamba_expand x hidden), a state of `mamba_state_dim` per channel, B and C shared by `mamba_groups` groups
    # of heads, and the causal convolution's kernel over x, B and C.
    mamba_num_heads: int = 0
    mamba_head_dim: int = 0
    mamba_state_dim: int = 0
    mamba_groups: int = 0
    mamba_conv_kernel_dim: int = 0
    # DeepSeek sparse attention (DeepSeek-V3.2, GLM-5's glm_moe_dsa): an indexer of `index_n_heads` heads of
    # `index_head_dim` scores every cached key and every layer's latent attention runs over its top `index_topk` only.
    # `indexer_layers` run the indexer (and cache its key); the others reuse the previous one's choice (GLM-5.2's
    # `indexer_types`, "full" or "shared").
    index_topk: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    indexer_layers: int = 0
    # Attention shapes per layer type, where a type's differ from the model's (0: the model's): full-attention layers'
    # KV heads and head width, with one tensor as both K and V (Gemma 4's num_global_key_value_heads, global_head_dim,
    # attention_k_eq_v), and sliding-window layers' query and KV heads and key and value widths (MiMo's swa_* fields).
    # `v_head_dim` is the value width of the model's own (non-latent) attention too; 0: head_dim.
    full_num_kv_heads: int = 0
    full_head_dim: int = 0
    full_k_eq_v: bool = False
    sliding_num_heads: int = 0
    sliding_num_kv_heads: int = 0
    sliding_head_dim: int = 0
    sliding_v_head_dim: int = 0

    @property
    def is_embedding(self) -> bool:
        return bool(self.pooling)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def _layers_of(self, kind: str) -> int:
        return sum(t == kind for t in self.layer_types)

    @property
    def sliding_attention_layers(self) -> int:
        """Layers that attend to the last `sliding_window` tokens only (their KV read and attention stop growing)."""
        return self._layers_of(SLIDING_ATTENTION)

    @property
    def linear_attention_layers(self) -> int:
        """Layers with a recurrent state of constant size per sequence (no KV cache)."""
        return self._layers_of(LINEAR_ATTENTION)

    @property
    def mamba_layers(self) -> int:
        """Mamba-2 layers: a recurrent state of constant size per sequence (no KV cache)."""
        return self._layers_of(MAMBA)

    @property
    def attention_layers(self) -> int:
        """Layers with a KV cache and softmax attention: full and sliding-window ones."""
        return self.num_layers - self.linear_attention_layers - self.mamba_layers

    @property
    def full_attention_layers(self) -> int:
        """Layers that attend to every earlier token."""
        return self.attention_layers - self.sliding_attention_layers

    def attention_shapes(self) -> tuple[AttentionShape, ...]:
        """The softmax-attention layers by type (full, then sliding-window), each with its heads and widths."""
        v_dim = self.v_head_dim or self.head_dim
        full = AttentionShape(
            FULL_ATTENTION,
            self.full_attention_layers,
            self.num_heads,
            self.full_num_kv_heads or self.num_kv_heads,
            self.full_head_dim or self.head_dim,
            self.full_head_dim or v_dim,
            self.full_k_eq_v,
        )
        sliding = AttentionShape(
            SLIDING_ATTENTION,
            self.sliding_attention_layers,
            self.sliding_num_heads or self.num_heads,
            self.sliding_num_kv_heads or self.num_kv_heads,
            self.sliding_head_dim or self.head_dim,
            self.sliding_v_head_dim or v_dim,
        )
        return tuple(shape for shape in (full, sliding) if shape.layers)

    def _padded(
        self, shape: AttentionShape, heads: int | None, kv_heads: int | None, padded: PaddedHeads | None
    ) -> tuple[int | None, int | None]:
        """(heads, kv_heads) of a layer type: the deployment's padded counts, else the legacy overrides (which
        every layer type shares), else the type's own."""
        if padded is not None:
            return padded.get(shape.kind, (shape.heads, shape.kv_heads))
        return heads, kv_heads

    def attention_params(self, heads: int | None = None, kv_heads: int | None = None) -> int:
        """Parameters of one attention block of the model's own heads (its full-attention layers' shape for a model
        whose layer types differ); `heads`/`kv_heads` override for padded layouts."""
        h = self.num_heads if heads is None else heads
        kv = self.num_kv_heads if kv_heads is None else kv_heads
        d = self.hidden_size
        if self.kv_lora_rank:
            qk = self.head_dim + self.rope_head_dim
            q = d * self.q_lora_rank + self.q_lora_rank * h * qk if self.q_lora_rank else d * h * qk
            kv_p = d * (self.kv_lora_rank + self.rope_head_dim) + self.kv_lora_rank * h * (
                self.head_dim + self.v_head_dim
            )
            return q + kv_p + h * self.v_head_dim * d
        v_dim = self.v_head_dim or self.head_dim
        own = AttentionShape(FULL_ATTENTION, 0, self.num_heads, self.num_kv_heads, self.head_dim, v_dim)
        shape = self.attention_shapes()[0] if self.attention_layers else own
        return shape.params(d, self.attn_output_gate, h, kv)

    def softmax_attention_params(
        self, heads: int | None = None, kv_heads: int | None = None, *, padded: PaddedHeads | None = None
    ) -> int:
        """Parameters of every softmax-attention layer (full and sliding-window), each with its type's shape."""
        if self.kv_lora_rank:  # latent attention: one layer type (MLA with layer types is refused)
            h, kv = self._padded(self.attention_shapes()[0], heads, kv_heads, padded)
            return self.attention_params(h, kv) * self.attention_layers
        d, gate = self.hidden_size, self.attn_output_gate
        return sum(
            s.params(d, gate, *self._padded(s, heads, kv_heads, padded)) * s.layers for s in self.attention_shapes()
        )

    def linear_attention_params(self) -> int:
        """Parameters of one Gated DeltaNet layer: the q, k, v and output-gate (z) projections, the per-head beta
        and decay (a) projections, the depthwise convolution over q, k and v, and the output projection."""
        key_dim = self.linear_num_key_heads * self.linear_key_head_dim
        value_dim = self.linear_num_value_heads * self.linear_value_head_dim
        d = self.hidden_size
        projections = d * (2 * key_dim + 2 * value_dim) + d * 2 * self.linear_num_value_heads + value_dim * d
        return projections + (2 * key_dim + value_dim) * self.linear_conv_kernel_dim

    def linear_attention_state_elements(self) -> int:
        """Recurrent state one sequence keeps over all linear-attention layers: a key x value matrix per value head
        and the convolution's last kernel - 1 inputs."""
        key_dim = self.linear_num_key_heads * self.linear_key_head_dim
        value_dim = self.linear_num_value_heads * self.linear_value_head_dim
        matrix = self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
        conv = (2 * key_dim + value_dim) * max(self.linear_conv_kernel_dim - 1, 0)
        return self.linear_attention_layers * (matrix + conv)

    def linear_attention_flops_per_token(self) -> int:
        """FLOPs of the delta rule per token over all linear-attention layers, beside their projections: per value
        head, S k, the rank-one update of S and the read-out q S (2 x key x value FLOPs each); constant in the
        sequence's length."""
        per_head = 6 * self.linear_key_head_dim * self.linear_value_head_dim
        return self.linear_attention_layers * self.linear_num_value_heads * per_head

    def _mamba_conv_channels(self) -> int:
        """Channels of a Mamba-2 layer's convolution: x (the inner width) and the groups' B and C."""
        return self.mamba_num_heads * self.mamba_head_dim + 2 * self.mamba_groups * self.mamba_state_dim

    def mamba_params(self) -> int:
        """Parameters of one Mamba-2 layer: in_proj (the gate z, x, B, C and one dt per head), the depthwise
        convolution over x, B and C, and out_proj."""
        inner = self.mamba_num_heads * self.mamba_head_dim
        d = self.hidden_size
        in_proj = d * (inner + self._mamba_conv_channels() + self.mamba_num_heads)
        return in_proj + self._mamba_conv_channels() * self.mamba_conv_kernel_dim + inner * d

    def mamba_state_elements(self) -> int:
        """Recurrent state one sequence keeps over all Mamba-2 layers: a head_dim x state_dim matrix per head and
        the convolution's last kernel - 1 inputs."""
        ssm = self.mamba_num_heads * self.mamba_head_dim * self.mamba_state_dim
        conv = self._mamba_conv_channels() * max(self.mamba_conv_kernel_dim - 1, 0)
        return self.mamba_layers * (ssm + conv)

    def mamba_flops_per_token(self) -> int:
        """FLOPs of the selective-state recurrence per token over all Mamba-2 layers, beside their projections: per
        head, the decay of the head_dim x state_dim state (one multiply an element), the rank-one update dt x B^T
        added to it and the read-out h C (2 x head_dim x state_dim each); constant in the sequence's length."""
        per_head = 5 * self.mamba_head_dim * self.mamba_state_dim
        return self.mamba_layers * self.mamba_num_heads * per_head

    def recurrent_state_elements(self) -> int:
        """State one sequence keeps in its linear-attention and Mamba-2 layers (0 without them)."""
        return self.linear_attention_state_elements() + self.mamba_state_elements()

    def recurrent_flops_per_token(self) -> int:
        """Recurrence FLOPs per token of the linear-attention and Mamba-2 layers, beside their projections."""
        return self.linear_attention_flops_per_token() + self.mamba_flops_per_token()

    @property
    def sparse_attention_window(self) -> int:
        """Keys a query attends to beyond which attention stops growing: the sliding window, or a sparse-attention
        indexer's top-k (0: neither)."""
        return self.sliding_window or self.index_topk

    def indexer_params(self) -> int:
        """Parameters of one layer's sparse-attention indexer: its queries from the query latent (wq_b), its one key
        head (wk) and its per-head weights (weights_proj)."""
        n, d = self.index_n_heads, self.index_head_dim
        return self.q_lora_rank * n * d + self.hidden_size * d + self.hidden_size * n

    def expert_params(self) -> int:
        """Parameters of one routed expert (gated MLP)."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    def dense_mlp_params(self) -> int:
        """Gated MLP (gate, up, down), or up and down only (BERT encoders, GPT-J)."""
        return (3 if self.gated_mlp else 2) * self.hidden_size * self.intermediate_size

    def layer_params(
        self, heads: int | None = None, kv_heads: int | None = None, *, padded: PaddedHeads | None = None
    ) -> tuple[int, int]:
        """(always-read parameters, routed-expert parameters) summed over all layers; `padded` gives a deployment's
        heads per layer type, `heads`/`kv_heads` the same for every type."""
        attn = (
            self.softmax_attention_params(heads, kv_heads, padded=padded)
            + self.linear_attention_params() * self.linear_attention_layers
            + self.mamba_params() * self.mamba_layers
            + self.indexer_params() * self.indexer_layers
        )
        dense_layers = self.num_layers - self.moe_layers
        always = attn + dense_layers * self.dense_mlp_params()
        routed = 0
        if self.is_moe:
            shared = self.shared_experts * self.expert_params() + self.hidden_size * self.num_experts
            always += self.moe_layers * shared
            routed = self.moe_layers * self.num_experts * self.expert_params()
        return always, routed

    def total_params(self) -> int:
        """Every parameter, embeddings included."""
        always, routed = self.layer_params()
        embed = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings or self.is_embedding else 2)
        return always + routed + embed

    def active_params(self) -> int:
        """Parameters one token touches (matmul FLOPs per token ~ 2x this)."""
        always, _ = self.layer_params()
        active_routed = self.moe_layers * self.experts_per_token * self.expert_params()
        return always + active_routed + self.lm_head_params()

    def lm_head_params(self) -> int:
        """The projection to the vocabulary of a language model; an embedding model has none."""
        return 0 if self.is_embedding else self.vocab_size * self.hidden_size

    def kv_elements_per_token(self, kv_heads: int | None = None, *, padded: PaddedHeads | None = None) -> int:
        """KV-cache elements stored per token over all layers with a KV cache (full and sliding-window attention)."""
        if self.kv_lora_rank:  # the latent and rope key, and a sparse-attention indexer's key where it runs
            return (
                self.num_layers * (self.kv_lora_rank + self.rope_head_dim) + self.indexer_layers * self.index_head_dim
            )
        return sum(
            s.kv_elements(self._padded(s, None, kv_heads, padded)[1]) * s.layers for s in self.attention_shapes()
        )

    def window_kv_elements_per_token(self, kv_heads: int | None = None, *, padded: PaddedHeads | None = None) -> int:
        """The part of kv_elements_per_token read for the last `sliding_window` only (sliding-window layers), or for
        the indexer's top `index_topk` keys (the latent KV of a sparse-attention model)."""
        if self.kv_lora_rank:
            return self.num_layers * (self.kv_lora_rank + self.rope_head_dim) if self.index_topk else 0
        return sum(
            s.kv_elements(self._padded(s, None, kv_heads, padded)[1]) * s.layers
            for s in self.attention_shapes()
            if s.kind == SLIDING_ATTENTION
        )

    def attention_flops_per_qk(
        self, heads: int | None = None, *, padded: PaddedHeads | None = None, window_only: bool = False
    ) -> int:
        """Attention FLOPs per (query, key) pair over all softmax-attention layers (or the sliding-window ones)."""
        if self.kv_lora_rank:  # latent attention: q.k over the decompressed heads, as the model's own widths
            h = self.num_heads if heads is None else heads
            latent = 4 * h * self.head_dim * self.attention_layers
            if self.index_topk:  # over the indexer's top-k keys; the indexer's q.k per head over every key
                indexer = 2 * self.index_n_heads * self.index_head_dim * self.indexer_layers
                return latent if window_only else latent + indexer
            return 0 if window_only else latent
        return sum(
            s.flops_per_qk(self._padded(s, heads, None, padded)[0]) * s.layers
            for s in self.attention_shapes()
            if s.kind == SLIDING_ATTENTION or not window_only
        )


FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
LINEAR_ATTENTION = "linear_attention"
MAMBA = "mamba"
LAYER_TYPES = frozenset({FULL_ATTENTION, SLIDING_ATTENTION, LINEAR_ATTENTION, MAMBA})
# GraniteMoeHybrid names its (full, position-free) attention layers "attention"
_LAYER_TYPE_SYNONYMS = {"attention": FULL_ATTENTION}
_LINEAR_HEAD_FIELDS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim")
_MAMBA_FIELDS = ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv")
ENCODER_MODEL_TYPES = frozenset({"bert", "roberta", "xlm-roberta"})
# Decoders whose MLP is fc_in/fc_out with no gate (their configs' MLP width is `n_inner`, default 4 x hidden).
UNGATED_MODEL_TYPES = ENCODER_MODEL_TYPES | {"gptj", "gpt2", "gpt_neox", "gpt_bigcode", "opt", "falcon"}
# Other families name the same fields differently; the Llama-style (or DeepSeek) name wins when both are present.
_FIELD_SYNONYMS = {
    "hidden_size": ("n_embd", "d_model"),
    "num_hidden_layers": ("n_layer", "num_layers"),
    "num_attention_heads": ("n_head",),
    "num_key_value_heads": ("num_kv_heads", "n_head_kv"),
    "intermediate_size": ("n_inner", "ffn_dim"),
    "max_position_embeddings": ("n_positions",),
    # AFMoE (Arcee Trinity): its shared experts and leading dense layers, as DeepSeek names them
    "n_shared_experts": ("num_shared_experts",),
    "first_k_dense_replace": ("num_dense_layers",),
    # Gemma 4's MoE block
    "num_experts_per_tok": ("top_k_experts",),
    # GraniteMoeHybrid's shared expert
    "shared_expert_intermediate_size": ("shared_intermediate_size",),
}


def _normalised(c: dict[str, Any]) -> dict[str, Any]:
    out = dict(c)
    for field_name, synonyms in _FIELD_SYNONYMS.items():
        if out.get(field_name) is None:
            out[field_name] = next((c[s] for s in synonyms if c.get(s) is not None), None)
            if out[field_name] is None:
                del out[field_name]
    return out


def from_hf_config(name: str, cfg: dict[str, Any], source: str = "") -> ModelConfig:
    """Build a ModelConfig from a Hugging Face config.json dictionary (uses `text_config` if nested)."""
    c = _normalised(cfg.get("text_config", cfg))
    if c.get("enable_moe_block") and c.get("shared_expert_intermediate_size") is None:
        # Gemma 4's MoE block runs the layer's dense MLP (intermediate_size) beside the routed experts: a shared expert
        c["shared_expert_intermediate_size"] = c.get("intermediate_size")
    try:
        hidden = int(c["hidden_size"])
        layers = int(c["num_hidden_layers"])
        heads = int(c["num_attention_heads"])
        vocab = int(c["vocab_size"])
    except KeyError as exc:
        raise ConfigurationError(f"config for {name!r} lacks required field {exc.args[0]!r}") from exc
    experts = int(c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts") or 0)
    inter = int(c.get("intermediate_size_mlp") or c.get("intermediate_size") or 4 * hidden)
    moe_inter = int(c.get("moe_intermediate_size") or (c.get("intermediate_size", inter) if experts else 0))
    moe_layers = 0
    if experts:
        step = int(c.get("interleave_moe_layer_step") or 1)
        first_dense = int(c.get("first_k_dense_replace") or 0)
        moe_layers = len([i for i in range(first_dense, layers) if (i + 1) % step == 0])
    mla = int(c.get("kv_lora_rank") or 0)
    layer_types = _layer_types(name, c, layers)
    if mla and layer_types:
        raise ConfigurationError(f"{name!r}: per-layer attention types with latent attention (MLA) are not modelled")
    index_fields = [int(c.get(k) or 0) for k in ("index_topk", "index_n_heads", "index_head_dim")]
    if any(index_fields) and not (all(index_fields) and mla and not layer_types):
        raise ConfigurationError(
            f"{name!r}: a sparse-attention indexer needs index_topk, index_n_heads, index_head_dim and latent attention"
        )
    head_dim = int(c.get("qk_nope_head_dim") or 0) if mla else int(c.get("head_dim") or hidden // heads)
    return ModelConfig(
        name=name,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=int(c.get("num_key_value_heads") or heads),
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=vocab,
        max_position_embeddings=int(c.get("max_position_embeddings") or 4096),
        num_experts=experts,
        experts_per_token=int(c.get("num_experts_per_tok") or 0),
        shared_experts=_shared_experts(name, c, moe_inter),
        moe_intermediate_size=moe_inter,
        moe_layers=moe_layers,
        kv_lora_rank=mla,
        q_lora_rank=int(c.get("q_lora_rank") or 0),
        rope_head_dim=int(c.get("qk_rope_head_dim") or 0),
        v_head_dim=int(c.get("v_head_dim") or 0),
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        source=source,
        encoder=c.get("model_type") in ENCODER_MODEL_TYPES,
        pooling=str(cfg.get("pooling") or ""),
        gated_mlp=c.get("model_type") not in UNGATED_MODEL_TYPES,
        layer_types=layer_types,
        sliding_window=int(c.get("sliding_window") or 0) if SLIDING_ATTENTION in layer_types else 0,
        linear_num_key_heads=int(c.get("linear_num_key_heads") or 0),
        linear_num_value_heads=int(c.get("linear_num_value_heads") or 0),
        linear_key_head_dim=int(c.get("linear_key_head_dim") or 0),
        linear_value_head_dim=int(c.get("linear_value_head_dim") or 0),
        linear_conv_kernel_dim=int(c.get("linear_conv_kernel_dim") or 0),
        attn_output_gate=bool(c.get("attn_output_gate", False)),
        mamba_num_heads=int(c.get("mamba_n_heads") or 0),
        mamba_head_dim=int(c.get("mamba_d_head") or 0),
        mamba_state_dim=int(c.get("mamba_d_state") or 0),
        mamba_groups=int(c.get("mamba_n_groups") or 0),
        mamba_conv_kernel_dim=int(c.get("mamba_d_conv") or 0),
        index_topk=index_fields[0],
        index_n_heads=index_fields[1],
        index_head_dim=index_fields[2],
        indexer_layers=_indexer_layers(name, c, layers) if index_fields[0] else 0,
        full_num_kv_heads=int(c.get("num_global_key_value_heads") or 0),
        full_head_dim=int(c.get("global_head_dim") or 0),
        full_k_eq_v=bool(c.get("attention_k_eq_v", False)),
        sliding_num_heads=int(c.get("swa_num_attention_heads") or 0),
        sliding_num_kv_heads=int(c.get("swa_num_key_value_heads") or 0),
        sliding_head_dim=int(c.get("swa_head_dim") or 0),
        sliding_v_head_dim=int(c.get("swa_v_head_dim") or 0),
    )


def _indexer_layers(name: str, c: dict[str, Any], layers: int) -> int:
    """Layers that run the sparse-attention indexer: those `indexer_types` calls "full" ("shared" ones reuse the
    previous full layer's top-k), or every layer."""
    raw = c.get("indexer_types")
    if raw is None:
        return layers
    types = [str(t) for t in raw]
    if len(types) != layers or not set(types) <= {"full", "shared"} or types[0] != "full":
        raise ConfigurationError(
            f"{name!r}: indexer_types must give 'full' or 'shared' for each of its {layers} layers"
        )
    return types.count("full")


def _shared_experts(name: str, c: dict[str, Any], moe_inter: int) -> int:
    """DeepSeek's `n_shared_experts`, or Qwen's `shared_expert_intermediate_size` in experts of `moe_inter` width."""
    if c.get("n_shared_experts") is not None or not c.get("shared_expert_intermediate_size"):
        return int(c.get("n_shared_experts") or 0)
    width = int(c["shared_expert_intermediate_size"])
    if not moe_inter or width % moe_inter:
        raise ConfigurationError(
            f"{name!r}: a shared expert {width} wide is not a whole number of {moe_inter}-wide experts"
        )
    return width // moe_inter


def _layer_types(name: str, c: dict[str, Any], layers: int) -> tuple[str, ...]:
    """`layer_types` as Hugging Face configs give it, or Qwen3-Next's `full_attention_interval` (every n-th layer
    full attention, the others linear); () when every layer is full attention. A config that names a sliding
    window but no layer types (Mistral's `sliding_window`) keeps full attention everywhere, as before."""
    raw = c.get("layer_types")
    if raw is None and c.get("full_attention_interval") and c.get("linear_num_value_heads"):
        step = int(c["full_attention_interval"])
        raw = [FULL_ATTENTION if (i + 1) % step == 0 else LINEAR_ATTENTION for i in range(layers)]
    if not raw:
        return ()
    types = tuple(_LAYER_TYPE_SYNONYMS.get(str(t), str(t)) for t in raw)
    if len(types) != layers or not set(types) <= LAYER_TYPES:
        raise ConfigurationError(
            f"{name!r}: layer_types must give one of {sorted(LAYER_TYPES)} for each of its {layers} layers"
        )
    if SLIDING_ATTENTION in types and not int(c.get("sliding_window") or 0):
        raise ConfigurationError(f"{name!r}: sliding_attention layers need a sliding_window")
    if LINEAR_ATTENTION in types and not all(c.get(k) for k in _LINEAR_HEAD_FIELDS):
        raise ConfigurationError(f"{name!r}: linear_attention layers need the linear_* head fields")
    if MAMBA in types:
        if not all(c.get(k) for k in _MAMBA_FIELDS):
            raise ConfigurationError(f"{name!r}: mamba layers need the fields {', '.join(_MAMBA_FIELDS)}")
        inner = int(c["mamba_n_heads"]) * int(c["mamba_d_head"])
        if c.get("mamba_expand") and inner != int(c["mamba_expand"]) * int(c["hidden_size"]):
            raise ConfigurationError(f"{name!r}: mamba_n_heads x mamba_d_head is not mamba_expand x hidden_size")
    return () if set(types) == {FULL_ATTENTION} else types


@cache
def _catalog() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(
        resources.files("switchyard.accelerator.sim").joinpath("data/models.json").read_text("utf-8")
    )
    return raw


@cache
def _registry() -> dict[str, ModelConfig]:
    return {m["name"]: from_hf_config(m["name"], m, m["source"]) for m in _catalog()["models"]}


@cache
def _alias_table() -> dict[str, dict[str, Any]]:
    return {a["name"]: a for a in _catalog()["aliases"]}


def model_aliases() -> dict[str, str]:
    """Every published id the catalog serves through another entry's architecture: id -> architecture.

    `-Instruct`, chat, dated and distilled releases share their base model's config.json shape; each entry of
    `data/models.json`'s alias table names the config it was checked against (`source`) and any field that
    differs (e.g. the 2507 Qwen3 releases' 262,144-token context).
    """
    return {name: a["architecture"] for name, a in _alias_table().items()}


def register_model(model: ModelConfig) -> ModelConfig:
    """Add (or replace) a model in this process's catalog."""
    _registry()[model.name] = model
    return model


def load_model_config(path: str | Path, name: str | None = None) -> ModelConfig:
    """Register the model described by a Hugging Face `config.json` file; its name defaults to the folder."""
    p = Path(path)
    cfg = json.loads(p.read_text("utf-8"))
    model_name = name or cfg.get("_name_or_path") or p.resolve().parent.name
    return register_model(from_hf_config(model_name, cfg, source=str(p)))


def get_model(name: str) -> ModelConfig:
    """The model with Hugging Face id `name` (an architecture of the catalog, a registered config, or a published
    id of the alias table, answered under its own name); raises UnknownNameError listing close matches."""
    models = _registry()
    if name in models:
        return models[name]
    alias = _alias_table().get(name)
    if alias is None:
        raise UnknownNameError("model", name, [*models, *_alias_table()])
    base = models[alias["architecture"]]
    overrides = {k: v for k, v in alias.items() if k in ("max_position_embeddings",)}
    return replace(base, name=name, source=f"{alias['source']} (architecture of {base.name})", **overrides)


def list_models() -> list[ModelConfig]:
    """Every model in the catalog (built-in and registered)."""
    return list(_registry().values())
