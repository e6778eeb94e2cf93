"""Model catalog: transformer architectures described by Hugging Face `config.json` fields."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from switchyard.accelerator.errors import ConfigurationError, UnknownNameError

__all__ = ["ModelConfig", "get_model", "list_models", "load_model_config", "model_aliases", "register_model"]


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

    @property
    def is_embedding(self) -> bool:
        return bool(self.pooling)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def attention_params(self, heads: int | None = None, kv_heads: int | None = None) -> int:
        """Parameters of one attention block; `heads`/`kv_heads` override for padded layouts."""
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
        return d * h * self.head_dim * 2 + 2 * d * kv * self.head_dim

    def expert_params(self) -> int:
        """Parameters of one routed expert (gated MLP)."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    def dense_mlp_params(self) -> int:
        """Gated MLP (gate, up, down), or up and down only (BERT encoders, GPT-J)."""
        return (3 if self.gated_mlp else 2) * self.hidden_size * self.intermediate_size

    def layer_params(self, heads: int | None = None, kv_heads: int | None = None) -> tuple[int, int]:
        """(always-read parameters, routed-expert parameters) summed over all layers."""
        attn = self.attention_params(heads, kv_heads) * self.num_layers
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

    def kv_elements_per_token(self, kv_heads: int | None = None) -> int:
        """KV-cache elements stored per token over all layers."""
        if self.kv_lora_rank:
            return self.num_layers * (self.kv_lora_rank + self.rope_head_dim)
        kv = self.num_kv_heads if kv_heads is None else kv_heads
        return 2 * self.num_layers * kv * self.head_dim


ENCODER_MODEL_TYPES = frozenset({"bert", "roberta", "xlm-roberta"})
# Decoders whose MLP is fc_in/fc_out with no gate (their configs' MLP width is `n_inner`, default 4 x hidden).
UNGATED_MODEL_TYPES = ENCODER_MODEL_TYPES | {"gptj", "gpt2", "gpt_neox", "gpt_bigcode", "opt", "falcon"}
# GPT-style configs name the same fields differently; the Llama-style name wins when both are present.
_FIELD_SYNONYMS = {
    "hidden_size": ("n_embd", "d_model"),
    "num_hidden_layers": ("n_layer", "num_layers"),
    "num_attention_heads": ("n_head",),
    "num_key_value_heads": ("num_kv_heads", "n_head_kv"),
    "intermediate_size": ("n_inner", "ffn_dim"),
    "max_position_embeddings": ("n_positions",),
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
        shared_experts=int(c.get("n_shared_experts") or 0),
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
    )


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
