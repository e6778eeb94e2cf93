"""What a store embeds with and how its files are cut: the embedding model and length chosen at creation, the
chunk sizes a strategy stands for under that model's input limit, and when a store expires.

A chunk is one embedding input, so a static strategy whose chunks are longer than the model encodes is refused
(400 naming ``chunking_strategy``); ``auto`` (800/400) is cut to the model's limit, half of it overlapping
(BGE-large encodes 512 tokens: its ``auto`` chunks are 512 tokens overlapping by 256).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from switchyard.accelerator.errors import UnknownNameError
from switchyard.accelerator.pool import EMBEDDING_SHAPES, AcceleratorPool
from switchyard.platform.admission import model_backend, served_models
from switchyard.platform.http.errors import InvalidRequest, NotFound
from switchyard.platform.knowledge.chunking import (
    AUTO_CHUNK_OVERLAP_TOKENS,
    AUTO_MAX_CHUNK_SIZE_TOKENS,
    AutoChunkingStrategy,
    StaticChunkingStrategy,
)
from switchyard.platform.models import VectorStore, utc_now

__all__ = ["EmbeddingChoice", "chunk_sizes", "embedding_choice", "input_limit", "is_expired", "touch"]


EmbeddingChoice = tuple[str, int, int]
"""``(served model name, dimensions, most tokens one input may have)``."""


def embedding_choice(
    pool: AcceleratorPool, tenant_id: str, *, model: str | None, dimensions: int | None, default_model: str
) -> EmbeddingChoice:
    """The model a new store embeds with and its vectors' length (400 naming ``embedding_model`` or
    ``dimensions``, 404 for a model the tenant may not use)."""
    name = model or default_model
    embedders = [b.name for b in served_models(pool, tenant_id) if b.spec.task == "embeddings"]
    if model is None and (not name or not _serves(pool, tenant_id, name)):  # the default, if the tenant has it
        if not embedders:
            raise InvalidRequest("no embedding model is served to this tenant", param="embedding_model")
        name = embedders[0]
    try:
        backend = model_backend(pool, name, tenant_id, task="embeddings")
    except InvalidRequest as exc:
        raise InvalidRequest(exc.message, param="embedding_model", code=exc.code) from None
    except NotFound as exc:
        raise NotFound(exc.message, param="embedding_model", code=exc.code) from None
    shape = EMBEDDING_SHAPES.get(backend.spec.model) if backend.spec.backend == "trainium-sim" else None
    if shape is None:  # an upstream model: its length is whatever it answers, unless the store names one
        if dimensions is None:
            raise InvalidRequest(
                f"{backend.name} does not say its vectors' length: give dimensions", param="dimensions"
            )
        return backend.name, dimensions, backend.context_window
    if dimensions is not None and not shape.min_dimensions <= dimensions <= shape.dimensions:
        allowed = (
            f"only {shape.dimensions}"
            if shape.min_dimensions == shape.dimensions
            else f"{shape.min_dimensions} to {shape.dimensions}"
        )
        raise InvalidRequest(f"{backend.name} answers {allowed} dimensions", param="dimensions", code="invalid_value")
    return backend.name, dimensions or shape.dimensions, shape.max_input_tokens


def _serves(pool: AcceleratorPool, tenant_id: str, name: str) -> bool:
    try:
        return model_backend(pool, name, tenant_id, task="embeddings") is not None
    except (InvalidRequest, NotFound):
        return False


def chunk_sizes(
    strategy: AutoChunkingStrategy | StaticChunkingStrategy | None,
    max_input_tokens: int,
    *,
    param: str = "chunking_strategy",
) -> dict[str, Any]:
    """The static sizes a file is chunked by, as a vector store file reports them: ``auto`` is 800/400, cut to the
    model's input limit (half of it overlapping); a static strategy past that limit is a 400."""
    if isinstance(strategy, StaticChunkingStrategy):
        size = strategy.static.max_chunk_size_tokens
        if size > max_input_tokens:
            raise InvalidRequest(
                f"chunks of {size} tokens are longer than the store's embedding model encodes ({max_input_tokens} "
                f"tokens at most): use max_chunk_size_tokens <= {max_input_tokens}",
                param=param,
                code="invalid_value",
            )
        return strategy.model_dump()
    size = min(AUTO_MAX_CHUNK_SIZE_TOKENS, max_input_tokens)
    overlap = AUTO_CHUNK_OVERLAP_TOKENS if size == AUTO_MAX_CHUNK_SIZE_TOKENS else size // 2
    return {"type": "static", "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}}


def input_limit(pool: AcceleratorPool, store: VectorStore) -> int:
    """The most tokens one chunk of ``store`` may have: its model's input limit (its default chunk size when the
    model is no longer served: ingestion then fails, naming the model)."""
    try:
        backend = pool.backend(store.embedding_model)
    except UnknownNameError:
        return int(store.chunking_strategy["static"]["max_chunk_size_tokens"])
    shape = EMBEDDING_SHAPES.get(backend.spec.model) if backend.spec.backend == "trainium-sim" else None
    return shape.max_input_tokens if shape is not None else backend.context_window


def set_expiry(row: VectorStore) -> None:
    if row.expires_after and row.last_active_at is not None:
        row.expires_at = row.last_active_at + timedelta(days=int(row.expires_after["days"]))
    else:
        row.expires_at = None


def is_expired(row: VectorStore) -> bool:
    return row.expires_at is not None and row.expires_at <= utc_now()


def touch(row: VectorStore) -> None:
    """The store was active now (its expiry moves on); an expired store stays expired."""
    if is_expired(row):
        return
    row.last_active_at = utc_now()
    set_expiry(row)
