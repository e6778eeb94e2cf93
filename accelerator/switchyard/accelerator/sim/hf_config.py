"""Reading a Hugging Face `config.json` into the model format: the fields of each family (Llama, DeepSeek, Qwen,
Gemma, GPT-style and BERT-style names, GraniteMoeHybrid, GLM, Laguna) mapped onto `ModelConfig`, and configs the
format cannot express refused with a `ConfigurationError`."""

from __future__ import annotations

from typing import Any

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.model_config import (
    FULL_ATTENTION,
    GATE_FULL,
    GATE_PER_HEAD,
    LAYER_TYPES,
    LINEAR_ATTENTION,
    MAMBA,
    SLIDING_ATTENTION,
    ModelConfig,
)

__all__ = ["ENCODER_MODEL_TYPES", "UNGATED_MODEL_TYPES", "from_hf_config"]

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
    per_layer_widths = c.get("intermediate_size") if isinstance(c.get("intermediate_size"), list) else None
    if per_layer_widths is not None:  # Gemma 3n's list of one MLP width per layer
        c["intermediate_size"] = per_layer_widths[0] if per_layer_widths else None
    inter = int(c.get("intermediate_size_mlp") or c.get("intermediate_size") or 4 * hidden)
    moe_inter = int(c.get("moe_intermediate_size") or (c.get("intermediate_size", inter) if experts else 0))
    moe_layers = _moe_layers(name, c, layers, experts)
    mla = int(c.get("kv_lora_rank") or 0)
    layer_types = _layer_types(name, c, layers)
    if mla and layer_types:
        raise ConfigurationError(f"{name!r}: per-layer attention types with latent attention (MLA) are not modelled")
    if mla and c.get("num_attention_heads_per_layer") is not None:
        raise ConfigurationError(f"{name!r}: query heads per layer with latent attention (MLA) are not modelled")
    full_heads, sliding_heads = _heads_per_layer_type(name, c, layers, layer_types)
    gate, gate_width = _output_gate(name, c)
    index_fields = [int(c.get(k) or 0) for k in ("index_topk", "index_n_heads", "index_head_dim")]
    if any(index_fields) and not (all(index_fields) and mla and not layer_types):
        raise ConfigurationError(
            f"{name!r}: a sparse-attention indexer needs index_topk, index_n_heads, index_head_dim and latent attention"
        )
    head_dim = int(c.get("qk_nope_head_dim") or 0) if mla else int(c.get("head_dim") or hidden // heads)
    kv_shared = _kv_shared_layers(name, c, layers, layer_types)
    if kv_shared and mla:
        raise ConfigurationError(f"{name!r}: KV sharing between layers with latent attention (MLA) is not modelled")
    mlp_widths = _mlp_widths(name, c, layers, inter, kv_shared, per_layer_widths)
    if mlp_widths and experts:
        raise ConfigurationError(f"{name!r}: MLP widths per layer with mixture-of-experts layers are not modelled")
    per_layer_input = int(c.get("hidden_size_per_layer_input") or 0)
    return ModelConfig(
        name=name,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=full_heads or heads,
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
        attn_output_gate=gate,
        attn_output_gate_width=gate_width,
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
        sliding_num_heads=sliding_heads,
        sliding_num_kv_heads=int(c.get("swa_num_key_value_heads") or 0),
        sliding_head_dim=int(c.get("swa_head_dim") or 0),
        sliding_v_head_dim=int(c.get("swa_v_head_dim") or 0),
        kv_shared_layers=kv_shared,
        mlp_widths=mlp_widths,
        per_layer_input_size=per_layer_input,
        per_layer_input_vocab_size=int(c.get("vocab_size_per_layer_input") or vocab) if per_layer_input else 0,
    )


def _moe_layers(name: str, c: dict[str, Any], layers: int, experts: int) -> int:
    """Layers with routed experts: those `mlp_layer_types` calls "sparse" (Laguna; the others "dense"), else every
    `interleave_moe_layer_step`-th layer after the first `first_k_dense_replace` (every layer by default)."""
    raw = c.get("mlp_layer_types")
    if raw is not None:
        types = [str(t) for t in raw]
        if len(types) != layers or not set(types) <= {"dense", "sparse"}:
            raise ConfigurationError(
                f"{name!r}: mlp_layer_types must give 'dense' or 'sparse' for each of its {layers} layers"
            )
        if "sparse" in types and not experts:
            raise ConfigurationError(f"{name!r}: mlp_layer_types names sparse layers but the config has no experts")
        return types.count("sparse")
    if not experts:
        return 0
    step = int(c.get("interleave_moe_layer_step") or 1)
    first_dense = int(c.get("first_k_dense_replace") or 0)
    return len([i for i in range(first_dense, layers) if (i + 1) % step == 0])


def _heads_per_layer_type(name: str, c: dict[str, Any], layers: int, layer_types: tuple[str, ...]) -> tuple[int, int]:
    """(full-attention layers' query heads, sliding-window layers' query heads), 0 where the config does not set
    them: MiMo's `swa_num_attention_heads`, or Laguna's `num_attention_heads_per_layer`, which the format carries
    per layer type, so each type's layers must agree, and each count be a multiple of its type's KV heads."""
    swa_heads = int(c.get("swa_num_attention_heads") or 0)
    raw = c.get("num_attention_heads_per_layer")
    if raw is None:
        return 0, swa_heads
    per_layer = [int(h) for h in raw]
    if len(per_layer) != layers or min(per_layer, default=0) < 1:
        raise ConfigurationError(
            f"{name!r}: num_attention_heads_per_layer must give a positive count for each of its {layers} layers"
        )
    types = layer_types or (FULL_ATTENTION,) * layers
    heads = {}
    for kind, kv_field in (
        (FULL_ATTENTION, "num_global_key_value_heads"),
        (SLIDING_ATTENTION, "swa_num_key_value_heads"),
    ):
        counts = {h for h, t in zip(per_layer, types, strict=True) if t == kind}
        if len(counts) > 1:
            raise ConfigurationError(
                f"{name!r}: num_attention_heads_per_layer differs between {kind} layers ({sorted(counts)}); the format "
                "carries query heads per layer type"
            )
        kv = int(c.get(kv_field) or c.get("num_key_value_heads") or 0)
        if counts and kv and next(iter(counts)) % kv:
            raise ConfigurationError(
                f"{name!r}: {next(iter(counts))} query heads in its {kind} layers are not a multiple of its {kv} KV "
                "heads"
            )
        heads[kind] = next(iter(counts), 0)
    if swa_heads and heads[SLIDING_ATTENTION] and swa_heads != heads[SLIDING_ATTENTION]:
        raise ConfigurationError(
            f"{name!r}: swa_num_attention_heads and num_attention_heads_per_layer disagree on the sliding layers' heads"
        )
    return heads[FULL_ATTENTION], heads[SLIDING_ATTENTION] or swa_heads


# Laguna's `gating` (transformers' LagunaConfig: True or "per-head", one softplus gate per head; "per-element", one
# per channel) and its per-layer `gating_types`, as gate widths.
_GATING = {True: GATE_PER_HEAD, "per-head": GATE_PER_HEAD, "per_head": GATE_PER_HEAD, "per-element": GATE_FULL,
           "per_element": GATE_FULL}  # fmt: skip


def _output_gate(name: str, c: dict[str, Any]) -> tuple[bool, str]:
    """(whether the attention output is gated, the gate's width): `attn_output_gate` (a gate as wide as the
    attention output: Qwen3-Next, AFMoE), or Laguna's `gating` and per-layer `gating_types`, which must agree."""
    gating = c.get("gating")
    kinds = ([] if gating is None or gating is False else [gating]) + list(c.get("gating_types") or ())
    if not kinds:
        return bool(c.get("attn_output_gate", False)), GATE_FULL
    widths = {_GATING.get(k) if isinstance(k, bool | str) else None for k in kinds}
    if None in widths:
        raise ConfigurationError(f"{name!r}: gating must be true, 'per-head' or 'per-element', not {kinds!r}")
    if len(widths) > 1:
        raise ConfigurationError(f"{name!r}: attention output gates of different widths per layer are not modelled")
    if c.get("attn_output_gate") is not None:
        raise ConfigurationError(f"{name!r}: both attn_output_gate and gating give the attention output's gate")
    return True, str(widths.pop())


def _kv_shared_layers(name: str, c: dict[str, Any], layers: int, layer_types: tuple[str, ...]) -> int:
    """Gemma 3n/4's `num_kv_shared_layers`: the last n layers reuse the KV cache of the last earlier layer of their
    type, so each of their types needs such a layer, and only softmax-attention layers have a cache to share."""
    shared = int(c.get("num_kv_shared_layers") or 0)
    if not shared:
        return 0
    types = layer_types or (FULL_ATTENTION,) * layers
    first = layers - shared
    if first < 1:
        raise ConfigurationError(f"{name!r}: num_kv_shared_layers {shared} leaves none of its {layers} layers a cache")
    for kind in set(types[first:]):
        if kind not in (FULL_ATTENTION, SLIDING_ATTENTION) or kind not in types[:first]:
            raise ConfigurationError(
                f"{name!r}: a layer sharing a KV cache needs an earlier {kind} layer with a cache of its own"
            )
    return shared


def _mlp_widths(
    name: str, c: dict[str, Any], layers: int, inter: int, kv_shared: int, per_layer: list[Any] | None
) -> tuple[int, ...]:
    """Dense MLP width per layer where the layers' differ: Gemma 3n's list, or Gemma 4's `use_double_wide_mlp`
    (twice intermediate_size in the KV-shared layers); () when every layer is intermediate_size wide."""
    if per_layer is not None:
        if len(per_layer) != layers:
            raise ConfigurationError(f"{name!r}: intermediate_size must give one width for each of its {layers} layers")
        widths = tuple(int(w) for w in per_layer)
    elif c.get("use_double_wide_mlp") and kv_shared:
        widths = (inter,) * (layers - kv_shared) + (2 * inter,) * kv_shared
    else:
        return ()
    return () if len(set(widths)) == 1 else widths


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
