"""The model format: a transformer's shape (`ModelConfig`, read from a Hugging Face `config.json` by `hf_config`) and
what follows from it for the cost model: parameters, KV-cache elements, attention shapes and FLOPs per layer type, and
the recurrent state of linear-attention and Mamba-2 layers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from switchyard.accelerator.errors import ConfigurationError

__all__ = [
    "FULL_ATTENTION",
    "GATE_FULL",
    "GATE_PER_HEAD",
    "GATE_WIDTHS",
    "LAYER_TYPES",
    "LINEAR_ATTENTION",
    "MAMBA",
    "SLIDING_ATTENTION",
    "AttentionShape",
    "ModelConfig",
    "PaddedHeads",
]

# Layer types (Hugging Face `layer_types`), as ModelConfig.layer_types names them
FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
LINEAR_ATTENTION = "linear_attention"
MAMBA = "mamba"
LAYER_TYPES = frozenset({FULL_ATTENTION, SLIDING_ATTENTION, LINEAR_ATTENTION, MAMBA})

# How wide a gate on the attention output is (ModelConfig.attn_output_gate_width): one gate per output channel, as
# wide as the attention output (heads x value width: Qwen3-Next's q_proj, AFMoE's gate_proj), or one per head,
# broadcast over its channels (hidden x heads: Laguna's g_proj).
GATE_FULL = "full"
GATE_PER_HEAD = "per_head"
GATE_WIDTHS = frozenset({GATE_FULL, GATE_PER_HEAD})

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
    # Of `layers`, those that attend over an earlier layer's KV cache (Gemma 3n/4's KV sharing): no k or v projection
    # and nothing cached of their own, but their attention computes, and reads the cache it shares, as any layer's.
    shared_kv_layers: int = 0
    # Gate elements per head on the attention output, each projected from the hidden state: 0 (no gate), v_dim (a
    # gate per output channel, GATE_FULL) or 1 (one per head, GATE_PER_HEAD).
    gate_width: int = 0

    def params(self, hidden: int, heads: int | None = None, kv_heads: int | None = None) -> int:
        """Parameters of one such layer's attention: q, k, v (none when k_eq_v), o and an optional output gate."""
        return self.query_output_params(hidden, heads) + self.kv_projection_params(hidden, kv_heads)

    def query_output_params(self, hidden: int, heads: int | None = None) -> int:
        """Parameters of one such layer's q and o projections and its optional output gate."""
        h = self.heads if heads is None else heads
        q = hidden * h * self.qk_dim
        return q + h * self.v_dim * hidden + self.gate_params(hidden, h)

    def gate_params(self, hidden: int, heads: int | None = None) -> int:
        """Parameters of one such layer's output gate projection: hidden -> heads x gate_width (0 without one)."""
        h = self.heads if heads is None else heads
        return hidden * h * self.gate_width

    def kv_projection_params(self, hidden: int, kv_heads: int | None = None) -> int:
        """Parameters of one such layer's k and v projections (one when k_eq_v)."""
        kv = self.kv_heads if kv_heads is None else kv_heads
        return hidden * kv * (self.qk_dim if self.k_eq_v else self.qk_dim + self.v_dim)

    def all_layers_params(self, hidden: int, heads: int | None = None, kv_heads: int | None = None) -> int:
        """Parameters of every such layer's attention: the layers sharing a KV cache have no k or v projection."""
        per_layer = self.params(hidden, heads, kv_heads)
        return per_layer * self.layers - self.kv_projection_params(hidden, kv_heads) * self.shared_kv_layers

    @property
    def kv_cache_layers(self) -> int:
        """Such layers with a KV cache of their own."""
        return self.layers - self.shared_kv_layers

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
    # A gate on the attention output before o_proj, projected from the layer's input (Qwen3.5's sigmoid gate in q_proj,
    # AFMoE's gate_proj, Laguna's softplus g_proj), in every softmax-attention layer, `attn_output_gate_width` wide:
    # GATE_FULL (heads x value width) or GATE_PER_HEAD (heads).
    attn_output_gate: bool = False
    attn_output_gate_width: str = GATE_FULL
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
    # KV sharing (Gemma 3n/4's num_kv_shared_layers): the last `kv_shared_layers` layers attend over the KV cache of
    # the last earlier layer of their type instead of caching their own (AttentionShape.shared_kv_layers).
    kv_shared_layers: int = 0
    # Dense MLP width of each layer, where the layers' widths differ (Gemma 4 E2B's double-wide MLP in its KV-shared
    # layers); empty: intermediate_size in every layer.
    mlp_widths: tuple[int, ...] = ()
    # Per-layer input embeddings (Gemma 3n/4's PLE, hidden_size_per_layer_input and vocab_size_per_layer_input): a
    # second embedding table of `per_layer_input_vocab_size` rows of `per_layer_input_size` per layer, one row gathered
    # per token, and per layer a gate (hidden -> width) and a projection back (width -> hidden), beside one projection
    # of the token's embedding to every layer's input (hidden -> layers x width).
    per_layer_input_size: int = 0
    per_layer_input_vocab_size: int = 0
    # A published pairing served with speculative decoding (models.json's speculative_pairs): the draft model's catalog
    # name and the tokens it proposes per step; the model's own fields are the target's. "": no draft.
    draft_model: str = ""
    num_speculative_tokens: int = 0

    def __post_init__(self) -> None:
        if self.attn_output_gate_width not in GATE_WIDTHS:
            raise ConfigurationError(
                f"{self.name!r}: attn_output_gate_width must be one of {sorted(GATE_WIDTHS)}, "
                f"not {self.attn_output_gate_width!r}"
            )

    @property
    def is_embedding(self) -> bool:
        return bool(self.pooling)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def _gate_width(self, v_dim: int) -> int:
        """Gate elements per head of a layer whose heads are `v_dim` wide (AttentionShape.gate_width)."""
        if not self.attn_output_gate:
            return 0
        return v_dim if self.attn_output_gate_width == GATE_FULL else 1

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

    def _shared_kv_layers_of(self, kind: str) -> int:
        """Layers of this type among the last `kv_shared_layers`, which reuse an earlier layer's KV cache."""
        if not self.kv_shared_layers:
            return 0
        types = self.layer_types or (FULL_ATTENTION,) * self.num_layers
        return sum(t == kind for t in types[self.num_layers - self.kv_shared_layers :])

    def attention_shapes(self) -> tuple[AttentionShape, ...]:
        """The softmax-attention layers by type (full, then sliding-window), each with its heads and widths."""
        v_dim = self.v_head_dim or self.head_dim
        full_v_dim = self.full_head_dim or v_dim
        full = AttentionShape(
            FULL_ATTENTION,
            self.full_attention_layers,
            self.num_heads,
            self.full_num_kv_heads or self.num_kv_heads,
            self.full_head_dim or self.head_dim,
            full_v_dim,
            self.full_k_eq_v,
            self._shared_kv_layers_of(FULL_ATTENTION),
            self._gate_width(full_v_dim),
        )
        sliding_v_dim = self.sliding_v_head_dim or v_dim
        sliding = AttentionShape(
            SLIDING_ATTENTION,
            self.sliding_attention_layers,
            self.sliding_num_heads or self.num_heads,
            self.sliding_num_kv_heads or self.num_kv_heads,
            self.sliding_head_dim or self.head_dim,
            sliding_v_dim,
            shared_kv_layers=self._shared_kv_layers_of(SLIDING_ATTENTION),
            gate_width=self._gate_width(sliding_v_dim),
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
        own = AttentionShape(
            FULL_ATTENTION,
            0,
            self.num_heads,
            self.num_kv_heads,
            self.head_dim,
            v_dim,
            gate_width=self._gate_width(v_dim),
        )
        shape = self.attention_shapes()[0] if self.attention_layers else own
        return shape.params(d, h, kv)

    def softmax_attention_params(
        self, heads: int | None = None, kv_heads: int | None = None, *, padded: PaddedHeads | None = None
    ) -> int:
        """Parameters of every softmax-attention layer (full and sliding-window), each with its type's shape (the
        layers that share another's KV cache without k and v projections)."""
        if self.kv_lora_rank:  # latent attention: one layer type (MLA with layer types is refused)
            h, kv = self._padded(self.attention_shapes()[0], heads, kv_heads, padded)
            return self.attention_params(h, kv) * self.attention_layers
        return sum(
            s.all_layers_params(self.hidden_size, *self._padded(s, heads, kv_heads, padded))
            for s in self.attention_shapes()
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

    def dense_mlp_params(self, width: int = 0) -> int:
        """Gated MLP (gate, up, down) of `width` (default intermediate_size), or up and down only (BERT encoders,
        GPT-J)."""
        return (3 if self.gated_mlp else 2) * self.hidden_size * (width or self.intermediate_size)

    def dense_mlps_params(self) -> int:
        """Parameters of the dense MLPs of every layer without MoE, each of its own width where `mlp_widths` gives
        them (a model with per-layer widths has no MoE layers)."""
        if self.mlp_widths:
            return sum(self.dense_mlp_params(w) for w in self.mlp_widths)
        return (self.num_layers - self.moe_layers) * self.dense_mlp_params()

    def per_layer_input_params(self) -> tuple[int, int]:
        """(projection parameters, table parameters) of the per-layer input embeddings (0, 0 without them): the
        projections are matmuls every token runs, the table is gathered one row per token."""
        width = self.num_layers * self.per_layer_input_size
        projections = self.hidden_size * width + self.num_layers * 2 * self.hidden_size * self.per_layer_input_size
        return projections, self.per_layer_input_vocab_size * width

    def per_layer_input_elements_per_token(self) -> int:
        """Elements of the per-layer input table one token gathers (its row: every layer's input)."""
        return self.num_layers * self.per_layer_input_size

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
        always = attn + self.dense_mlps_params() + self.per_layer_input_params()[0]
        routed = 0
        if self.is_moe:
            shared = self.shared_experts * self.expert_params() + self.hidden_size * self.num_experts
            always += self.moe_layers * shared
            routed = self.moe_layers * self.num_experts * self.expert_params()
        return always, routed

    def total_params(self) -> int:
        """Every parameter, embeddings (and per-layer input embeddings) included."""
        always, routed = self.layer_params()
        embed = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings or self.is_embedding else 2)
        return always + routed + embed + self.per_layer_input_params()[1]

    def active_params(self) -> int:
        """Parameters one token touches (matmul FLOPs per token ~ 2x this)."""
        always, _ = self.layer_params()
        active_routed = self.moe_layers * self.experts_per_token * self.expert_params()
        return always + active_routed + self.lm_head_params()

    def lm_head_params(self) -> int:
        """The projection to the vocabulary of a language model; an embedding model has none."""
        return 0 if self.is_embedding else self.vocab_size * self.hidden_size

    def kv_elements_per_token(self, kv_heads: int | None = None, *, padded: PaddedHeads | None = None) -> int:
        """KV-cache elements stored per token over all layers with a KV cache of their own (full and sliding-window
        attention; a layer sharing another's cache stores nothing)."""
        if self.kv_lora_rank:  # the latent and rope key, and a sparse-attention indexer's key where it runs
            return (
                self.num_layers * (self.kv_lora_rank + self.rope_head_dim) + self.indexer_layers * self.index_head_dim
            )
        return sum(
            s.kv_elements(self._padded(s, None, kv_heads, padded)[1]) * s.kv_cache_layers
            for s in self.attention_shapes()
        )

    def kv_read_elements_per_token(self, kv_heads: int | None = None, *, padded: PaddedHeads | None = None) -> int:
        """KV-cache elements a forward pass reads per context token: every softmax-attention layer reads the cache
        it attends over, its own or the one it shares (kv_elements_per_token without KV sharing)."""
        if self.kv_lora_rank:
            return self.kv_elements_per_token()
        return sum(
            s.kv_elements(self._padded(s, None, kv_heads, padded)[1]) * s.layers for s in self.attention_shapes()
        )

    def window_kv_elements_per_token(self, kv_heads: int | None = None, *, padded: PaddedHeads | None = None) -> int:
        """The part of kv_read_elements_per_token read for the last `sliding_window` only (sliding-window layers), or
        for the indexer's top `index_topk` keys (the latent KV of a sparse-attention model)."""
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
