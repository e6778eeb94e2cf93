"""A document's text cut into overlapping windows of tokens, by OpenAI's chunking strategies.

The strategies are OpenAI's shapes: ``{"type": "auto"}`` (800-token chunks overlapping by 400) and
``{"type": "static", "static": {"max_chunk_size_tokens": 100..4096, "chunk_overlap_tokens": 0..half of it}}``.
A chunk is ``max_chunk_size_tokens`` consecutive tokens of the text (the last one fewer), and each chunk starts
``max - overlap`` tokens after the one before, so neighbours share ``chunk_overlap_tokens`` tokens.

Tokens are the accelerator pool's (``switchyard.accelerator.pool.tokens``): the one approximation every model on
the simulated fleet counts with, embedding models included, so a chunk's ``tokens`` is what embedding it is
billed for (``input_tokens``). That tokenizer has no offsets, but its tokens cover every character in order, so
each token's span is the sum of the lengths before it; the text is tokenized in blocks of ``_BLOCK_CHARS`` (a
token depends on at most the next five characters, so the tokens near a block's end are tokenized again with
the next block), which keeps memory bounded and the work linear in the text: a 10 MB text takes about a second.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from switchyard.accelerator.pool.tokens import split_tokens

__all__ = [
    "AUTO_CHUNK_OVERLAP_TOKENS",
    "AUTO_MAX_CHUNK_SIZE_TOKENS",
    "AutoChunkingStrategy",
    "Chunk",
    "ChunkingStrategy",
    "StaticChunking",
    "StaticChunkingStrategy",
    "chunk_text",
    "static_chunking",
]

AUTO_MAX_CHUNK_SIZE_TOKENS = 800
AUTO_CHUNK_OVERLAP_TOKENS = 400
_BLOCK_CHARS = 1 << 16
_TOKEN_LOOKAHEAD_CHARS = 5  # the pool's tokens are at most five characters: one space and four word characters


class StaticChunking(BaseModel):
    """The sizes of a static strategy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_chunk_size_tokens: int = Field(
        ge=100, le=4096, description="The most tokens in each chunk: at least 100, at most 4096."
    )
    chunk_overlap_tokens: int = Field(
        ge=0, description="Tokens each chunk shares with the next: none or more, at most half of the chunk size."
    )

    @model_validator(mode="after")
    def _overlap_at_most_half(self) -> Self:
        if self.chunk_overlap_tokens > self.max_chunk_size_tokens / 2:
            raise ValueError("chunk_overlap_tokens must not exceed half of max_chunk_size_tokens")
        return self


class AutoChunkingStrategy(BaseModel):
    """OpenAI's default: 800-token chunks overlapping by 400."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["auto"] = "auto"


class StaticChunkingStrategy(BaseModel):
    """Chunks of the given sizes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["static"] = "static"
    static: StaticChunking


ChunkingStrategy = Annotated[AutoChunkingStrategy | StaticChunkingStrategy, Field(discriminator="type")]
"""A ``chunking_strategy`` as a request gives it (validate with ``pydantic.TypeAdapter(ChunkingStrategy)``)."""


def static_chunking(strategy: AutoChunkingStrategy | StaticChunkingStrategy | None) -> StaticChunkingStrategy:
    """The static sizes a strategy stands for (what a vector store file reports: ``auto`` is 800/400)."""
    if isinstance(strategy, StaticChunkingStrategy):
        return strategy
    sizes = StaticChunking(
        max_chunk_size_tokens=AUTO_MAX_CHUNK_SIZE_TOKENS, chunk_overlap_tokens=AUTO_CHUNK_OVERLAP_TOKENS
    )
    return StaticChunkingStrategy(static=sizes)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One window of a text: ``text == source[start_char:end_char]``, ``tokens`` of the pool's tokens."""

    index: int
    text: str
    tokens: int
    start_char: int
    end_char: int


def _token_ends(text: str) -> Iterator[int]:
    """The character offset where each of ``text``'s tokens ends, in order (the pool's tokenization)."""
    start = 0
    while start < len(text):
        stop = min(len(text), start + _BLOCK_CHARS)
        last_block = stop == len(text)
        position = start
        for token in split_tokens(text[start:stop]):
            if not last_block and position + _TOKEN_LOOKAHEAD_CHARS > stop:
                break  # the block's end may have cut this token short: tokenize it again with the next block
            position += len(token)
            yield position
        start = position


def chunk_text(text: str, strategy: AutoChunkingStrategy | StaticChunkingStrategy | None = None) -> Iterator[Chunk]:
    """``text``'s chunks, in order (none for an empty text), by ``strategy`` (``auto`` when not given)."""
    sizes = static_chunking(strategy).static
    size, step = sizes.max_chunk_size_tokens, sizes.max_chunk_size_tokens - sizes.chunk_overlap_tokens
    window: deque[int] = deque([0])  # token boundaries from the next chunk's start: at most size + 1 of them
    index = 0
    last_end = 0  # the character where the last chunk ended
    for end in _token_ends(text):
        window.append(end)
        if len(window) == size + 1:
            yield Chunk(index, text[window[0] : end], size, window[0], end)
            index, last_end = index + 1, end
            for _ in range(step):
                window.popleft()
    if window[-1] > last_end:  # the tail no chunk has reached yet
        yield Chunk(index, text[window[0] : window[-1]], len(window) - 1, window[0], window[-1])
