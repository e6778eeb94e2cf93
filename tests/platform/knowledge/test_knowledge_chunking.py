"""Chunking (issue 25): OpenAI's strategies validated as OpenAI does, windows of the pool's tokens with the asked
overlap and exact character offsets, the same tokens embedding bills, and linear work on a 10 MB text."""

from __future__ import annotations

import inspect
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

import switchyard.platform.knowledge as knowledge
from switchyard.accelerator.pool.embeddings import input_tokens
from switchyard.accelerator.pool.tokens import count_tokens, split_tokens
from switchyard.platform.knowledge import (
    AutoChunkingStrategy,
    ChunkingStrategy,
    StaticChunkingStrategy,
    chunk_text,
    static_chunking,
)
from switchyard.platform.knowledge import chunking as chunking_module

STRATEGY: TypeAdapter[Any] = TypeAdapter(ChunkingStrategy)


def _static(size: int, overlap: int) -> StaticChunkingStrategy:
    return STRATEGY.validate_python(
        {"type": "static", "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}}
    )


def test_auto_is_800_token_chunks_overlapping_by_400() -> None:
    auto = STRATEGY.validate_python({"type": "auto"})
    assert isinstance(auto, AutoChunkingStrategy)
    resolved = static_chunking(auto)
    assert resolved.model_dump() == {
        "type": "static",
        "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400},
    }
    assert static_chunking(None) == resolved
    assert static_chunking(_static(100, 0)).static.max_chunk_size_tokens == 100


@pytest.mark.parametrize(
    ("body", "where", "meaning"),
    [
        (
            {"max_chunk_size_tokens": 99, "chunk_overlap_tokens": 0},
            "max_chunk_size_tokens",
            "greater than or equal to 100",
        ),
        (
            {"max_chunk_size_tokens": 4097, "chunk_overlap_tokens": 0},
            "max_chunk_size_tokens",
            "less than or equal to 4096",
        ),
        (
            {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": -1},
            "chunk_overlap_tokens",
            "greater than or equal to 0",
        ),
        (
            {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 401},
            "",
            "must not exceed half of max_chunk_size_tokens",
        ),
        ({"max_chunk_size_tokens": 800}, "chunk_overlap_tokens", "Field required"),
        ({"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 0, "x": 1}, "x", "Extra inputs are not permitted"),
    ],
)
def test_a_static_strategy_out_of_openais_bounds_is_refused_saying_which_field(
    body: dict[str, Any], where: str, meaning: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        STRATEGY.validate_python({"type": "static", "static": body})
    (error,) = caught.value.errors()
    assert error["loc"] == ("static", "static", where) if where else error["loc"] == ("static", "static")
    assert meaning in error["msg"]


def test_an_unknown_strategy_type_or_a_static_one_without_sizes_is_refused() -> None:
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        STRATEGY.validate_python({"type": "semantic"})
    with pytest.raises(ValidationError, match="Field required"):
        STRATEGY.validate_python({"type": "static"})
    assert _static(800, 400).static.chunk_overlap_tokens == 400  # exactly half is allowed


def _expected(text: str, size: int, overlap: int) -> list[str]:
    """The windows computed the obvious way, from the whole text's tokens at once."""
    tokens = split_tokens(text)
    step, windows, start = size - overlap, [], 0
    while start < len(tokens):
        windows.append("".join(tokens[start : start + size]))
        if start + size >= len(tokens):
            break
        start += step
    return windows


TEXT = st.lists(
    st.sampled_from([*"abcdefghij XYZ0123\n\t.,;!é—", "  ", "word ", "    ", "microsecond"]), max_size=1_500
).map("".join)


@settings(max_examples=60, deadline=None)
@given(text=TEXT, size=st.integers(100, 300), overlap_share=st.floats(0, 0.5))
def test_chunks_are_windows_of_the_pools_tokens_with_exact_offsets(text: str, size: int, overlap_share: float) -> None:
    overlap = int(size * overlap_share)
    original = chunking_module._BLOCK_CHARS
    chunking_module._BLOCK_CHARS = 7  # many block ends, so re-tokenizing across them is exercised
    try:
        chunks = list(chunk_text(text, _static(size, overlap)))
    finally:
        chunking_module._BLOCK_CHARS = original
    assert [chunk.text for chunk in chunks] == _expected(text, size, overlap)
    assert chunks == list(chunk_text(text, _static(size, overlap)))  # block size changes nothing
    for index, chunk in enumerate(chunks):
        assert chunk.index == index
        assert text[chunk.start_char : chunk.end_char] == chunk.text
        assert chunk.tokens == count_tokens(chunk.text) == input_tokens([chunk.text])[0]  # what embedding bills
        assert chunk.tokens == size or index == len(chunks) - 1
    if chunks:
        assert (chunks[0].start_char, chunks[-1].end_char) == (0, len(text))


def test_neighbouring_chunks_share_exactly_the_overlap() -> None:
    text = " ".join(f"w{n:03d}" for n in range(1_000))  # one token a word and its space: "w000", " w001", ...
    chunks = list(chunk_text(text, _static(200, 50)))
    assert [chunk.tokens for chunk in chunks] == [200, 200, 200, 200, 200, 200, 100]
    for before, after in itertools.pairwise(chunks):
        shared = text[after.start_char : before.end_char]
        assert count_tokens(shared) == 50
        assert before.text.endswith(shared)
        assert after.text.startswith(shared)


def test_empty_and_short_texts() -> None:
    assert list(chunk_text("")) == []
    (only,) = chunk_text("just a few words")
    assert (only.text, only.tokens, only.start_char, only.end_char) == ("just a few words", 5, 0, 16)  # " word" "s"


@pytest.mark.timeout(120)
def test_a_10_mb_text_is_chunked_in_one_linear_pass() -> None:
    """About 2.5M tokens into 6,000 auto chunks in seconds (the timeout catches only a quadratic)."""
    paragraph = "Trainium2 UltraServers link 64 chips over NeuronLink; each chip holds 96 GiB of HBM.\n"
    text = paragraph * (10_000_000 // len(paragraph))
    total = 0
    last = None
    for chunk in chunk_text(text, AutoChunkingStrategy()):
        assert chunk.tokens <= 800
        total += 1
        last = chunk
    tokens = count_tokens(text)
    assert total == -(-(tokens - 400) // 400)
    assert last is not None
    assert last.end_char == len(text)


def test_the_package_exports_what_it_names() -> None:
    assert sorted(knowledge.__all__) == sorted(set(knowledge.__all__))
    for name in knowledge.__all__:
        assert getattr(knowledge, name) is not None
    names = {name for name in dir(knowledge) if not name.startswith("_") and name != "annotations"}
    public = {name for name in names if not inspect.ismodule(getattr(knowledge, name))}  # (its modules are no names)
    assert public == set(knowledge.__all__)
