"""Embedding calls on the pool: the request, the vectors it answers with, and the simulator's vectors.

An embedding call encodes each of its inputs in one prefill-only pass (no decode) on the deployment's replicas;
the pooled hidden state of that pass is the input's vector. The simulator computes no hidden states: its vector
for an input is pseudo-random, seeded by a hash of the model and the input (its text, or its token ids), cut to
the requested dimensions (a vector cut shorter is the start of the longer one, as with Matryoshka models) and
scaled to unit length. The same input always gets the same vector; similar inputs
do not get similar vectors, so the simulator is for plumbing, metering and load, not for retrieval quality.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from switchyard.accelerator.pool.tokens import count_tokens
from switchyard.accelerator.pool.types import Priority

__all__ = [
    "EMBEDDING_SHAPES",
    "EmbeddingInput",
    "EmbeddingRequest",
    "EmbeddingShape",
    "Embeddings",
    "embedding_vector",
    "input_tokens",
]

EmbeddingInput = str | tuple[int, ...]
"""One input: a text, or the token ids a client tokenized itself."""


@dataclass(frozen=True, slots=True)
class EmbeddingShape:
    """What a catalog embedding model answers with: vector dimensions and the longest input it encodes."""

    dimensions: int  # the model's own vector length
    min_dimensions: int  # the shortest vector it may be cut to (Matryoshka training); == dimensions if it cannot
    max_input_tokens: int  # per input
    source: str


EMBEDDING_SHAPES: dict[str, EmbeddingShape] = {
    # Model card: "Dimension 1024, Sequence Length 512" (the config's max_position_embeddings is 512 too);
    # 335M parameters. Trained at one output size: vectors cannot be shortened.
    "BAAI/bge-large-en-v1.5": EmbeddingShape(
        dimensions=1024,
        min_dimensions=1024,
        max_input_tokens=512,
        source="huggingface.co/BAAI/bge-large-en-v1.5 (model card, model list table)",
    ),
    # Model card: 8B parameters, 36 layers, "Context Length 32k", "Embedding Dimension Up to 4096",
    # "MRL Support: Yes" with "user-defined output dimensions ranging from 32 to 4096". Its config.json allows
    # 40960 positions; the card's 32k is what the model is served and evaluated at.
    "Qwen/Qwen3-Embedding-8B": EmbeddingShape(
        dimensions=4096,
        min_dimensions=32,
        max_input_tokens=32_768,
        source="huggingface.co/Qwen/Qwen3-Embedding-8B (model card, model overview)",
    ),
}


@dataclass(frozen=True, slots=True)
class EmbeddingRequest:
    """One embedding call to run on the fleet: each input becomes one vector, in order."""

    request_id: str
    tenant: str
    model: str
    inputs: tuple[EmbeddingInput, ...]
    dimensions: int | None = None  # None: the model's own length
    priority: Priority = Priority.STANDARD
    weight: float = 1.0
    user: str | None = None  # the client's end-user id: forwarded upstream, and the routing session
    trace_context: tuple[tuple[str, str], ...] = ()  # W3C trace-context headers, sent on by a remote deployment
    compute_ceiling_chip_us: int | None = None  # what its budget hold covers: an upstream is stopped there (failed)


@dataclass(frozen=True, slots=True)
class Embeddings:
    """The vectors of an embedding call, one per input in the request's order."""

    vectors: tuple[tuple[float, ...], ...]


def input_tokens(inputs: Sequence[EmbeddingInput]) -> list[int]:
    """Tokens of each input (at least one: an empty text is still one pass over its special token)."""
    return [max(1, count_tokens(item) if isinstance(item, str) else len(item)) for item in inputs]


def embedding_vector(model: str, item: EmbeddingInput, dimensions: int) -> tuple[float, ...]:
    """The simulator's vector for ``item``: seeded by a hash of the model and the input, unit length, float32
    values (what a base64 answer carries exactly)."""
    key = json.dumps([model, item if isinstance(item, str) else list(item)]).encode()
    seed = int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dimensions)
    vector /= np.linalg.norm(vector)
    return tuple(float(x) for x in vector.astype(np.float32))
