"""Model catalog: the architectures of `data/models.json` (read by `hf_config`), the published ids its alias table
serves through them, the published target + draft pairs of its speculative-decoding table, and models registered at
run time."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from switchyard.accelerator.errors import UnknownNameError
from switchyard.accelerator.sim.hf_config import from_hf_config
from switchyard.accelerator.sim.model_config import ModelConfig

__all__ = [
    "get_model",
    "list_models",
    "load_model_config",
    "model_aliases",
    "register_model",
]


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


@cache
def _pair_table() -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in _catalog().get("speculative_pairs", [])}


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
    """The model with Hugging Face id `name` (an architecture of the catalog, a registered config, a published id of
    the alias table, answered under its own name, or a target + draft pair of the speculative-decoding table: the
    target's architecture with `draft_model` and `num_speculative_tokens` set); raises UnknownNameError listing close
    matches."""
    models = _registry()
    if name in models:
        return models[name]
    pair = _pair_table().get(name)
    if pair is not None:
        target = get_model(pair["target"])
        get_model(pair["draft"])  # the draft is a catalog model too
        return replace(
            target,
            name=name,
            source=f"{pair['source']} (target {target.name}, draft {pair['draft']})",
            draft_model=pair["draft"],
            num_speculative_tokens=int(pair["num_speculative_tokens"]),
        )
    alias = _alias_table().get(name)
    if alias is None:
        raise UnknownNameError("model", name, [*models, *_alias_table(), *_pair_table()])
    base = models[alias["architecture"]]
    overrides = {k: v for k, v in alias.items() if k in ("max_position_embeddings",)}
    return replace(base, name=name, source=f"{alias['source']} (architecture of {base.name})", **overrides)


def list_models() -> list[ModelConfig]:
    """Every model in the catalog (built-in and registered)."""
    return list(_registry().values())
