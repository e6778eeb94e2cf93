"""Embedding calls on the pool: the request, the vectors it answers with, and the simulator's vectors.

An embedding call encodes each of its inputs in one prefill-only pass (no decode) on the deployment's replicas;
the pooled hidden state of that pass is the input's vector. The simulator computes no hidden states: its vector
for an input is a *hashed bag of n-grams* (feature hashing, a sparse random projection), so that texts sharing
words get close vectors and retrieval over a simulated model is useful for development and tests.

What a simulated vector is:

- **Lexical.** A text's features are its lower-cased words, its word bigrams and the character 3- to 5-grams of
  each word (so "embedding" and "embeddings" share most of theirs); token-id inputs use token unigrams, bigrams
  and trigrams. Repeated features count sub-linearly (``1 + ln count``), so a long text is not its most frequent
  word. Each feature is hashed (keyed BLAKE2b: the model's name is the key, so two models' vectors do not compare,
  and nothing depends on ``PYTHONHASHSEED``) to one signed position in each *band* of the model's full dimension:
  ``[0, 32)``, ``[32, 64)``, ``[64, 128)``, ... up to the model's length. The sum is scaled to unit length.
- **Matryoshka by construction.** Every feature lands in every band, so a vector cut to the first ``d``
  positions (``dimensions``) still holds all features, only with more collisions: it is the start of the longer
  vector, rescaled, and still ranks texts sharing words first, even at the smallest allowed size (32). Each band
  is weighted by the square root of its width, so the full vector is as accurate as one hashed into all of its
  positions at once.
- **Deterministic and cheap.** The same model and input give the same vector in every process. The work is
  linear in the input (at most ``MAX_FEATURES_PER_TOKEN`` hashed features per input token, each word hashed once
  per process while it stays in a cache), so 8k-token inputs in batches of hundreds take a moment.

What it is not: semantic. Synonyms and paraphrases with no words (or word pieces) in common are not close, word
order beyond neighbouring pairs is ignored, and common words make unrelated texts slightly similar (there is no
corpus to learn which words are rare). Cosine values are not calibrated like a real model's; rankings by shared
words are what it offers. A real upstream model (``openai-compatible``) is used as it is.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from switchyard.accelerator.pool.tokens import count_tokens
from switchyard.accelerator.pool.types import Priority

__all__ = [
    "EMBEDDING_SHAPES",
    "MAX_FEATURES_PER_TOKEN",
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


# --- the simulator's vectors: feature hashing (module docstring) ---

_WORD = re.compile(r"\w+")
_SYMBOL = re.compile(r"[^\w\s]")  # the features of a text without any word: its other characters
_WORD_PIECE_CHARS = 32  # a longer run of word characters (a hash, base64) counts as pieces of this length
_CHAR_GRAMS = (3, 4, 5)
_FIRST_BAND = 32  # the smallest band: the shortest cut a Matryoshka catalog model allows
_MAX_BANDS = 16  # a BLAKE2b digest holds 64 bytes: 4 per band
# Each kind's weight: a word itself counts most, then its neighbour pairs; its character n-grams together weigh
# a little less than the word (about 15 of them at 0.2), so shared word pieces count without drowning shared words.
_WORD_WEIGHT = 1.0
_BIGRAM_WEIGHT = 0.5
_CHAR_GRAM_WEIGHT = 0.2
_FUNCTION_WORD_WEIGHT = 0.2  # and no character n-grams: see _FUNCTION_WORDS
# English function words, which every text holds: without a corpus to tell rare words from common ones, these
# would make all texts alike and drown a chunk's rare words (a fixed list stands in for the statistics an index
# keeps). They still count a little, so a query of only such words finds the texts that hold them.
_FUNCTION_WORDS = frozenset(
    (  # noqa: SIM905 (a list literal of 120 words reads worse)
        "a about above after again against all am an and any are as at be because been before being below between "
        "both but by can could did do does doing down during each few for from further had has have having he her "
        "here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not "
        "now of off on once only or other our ours ourselves out over own same she should so some such than that the "
        "their theirs them themselves then there these they this those through to too under until up very was we were "
        "what when where which while who whom why will with would you your yours yourself yourselves"
    ).split()
)
_EMPTY = b"\x00empty"  # the one feature of an input with none (an empty text or token list)
_WORD_CACHE = 8_192  # words kept hashed per process (about 2 KB each)

MAX_FEATURES_PER_TOKEN = 16
"""Hashed features per input token at most. A word of ``k`` characters is at least ``k / 4`` tokens and has at
most ``1 + 3k`` features (itself, and fewer than ``k`` character n-grams of each of three lengths) and one bigram:
at most 14 a token. A token id has three (itself, a bigram, a trigram), as has a symbol of a text without words."""

Floats = npt.NDArray[np.float64]
Positions = npt.NDArray[np.int64]


def _bands(full_dimensions: int) -> tuple[int, ...]:
    """The bands' edges in a vector of ``full_dimensions``: 0, 32, 64, 128, ... and the full length."""
    edges = [0]
    edge = _FIRST_BAND
    while edge < full_dimensions and len(edges) < _MAX_BANDS:
        edges.append(edge)
        edge *= 2
    edges.append(full_dimensions)
    return tuple(edges)


def _digests(key: bytes, features: Sequence[bytes], bands: int) -> npt.NDArray[np.uint32]:
    """One 32-bit hash per band for each feature (rows): keyed BLAKE2b, the same in every process."""
    size = 4 * bands
    joined = b"".join(hashlib.blake2b(feature, digest_size=size, key=key).digest() for feature in features)
    return np.frombuffer(joined, dtype="<u4").reshape(len(features), bands)


def _hashed(key: bytes, edges: tuple[int, ...], features: Sequence[bytes]) -> tuple[Positions, Floats]:
    """Each feature's position and sign (+1/-1) in every band, flattened."""
    starts = np.array(edges[:-1], dtype=np.int64)
    widths = np.array([end - start for start, end in itertools.pairwise(edges)], dtype=np.int64)
    hashes = _digests(key, features, len(widths)).astype(np.int64)
    positions: Positions = (starts + (hashes >> 1) % widths).ravel()
    signs: Floats = ((hashes & 1) * 2 - 1).astype(np.float64).ravel()
    return positions, signs


@lru_cache(maxsize=_WORD_CACHE)
def _word(key: bytes, edges: tuple[int, ...], word: str) -> tuple[Positions, Floats]:
    """A word's own feature and its character n-grams (of ``<word>``), hashed and weighted."""
    padded = f"<{word}>"
    function_word = word in _FUNCTION_WORDS
    grams = [] if function_word else [padded[i : i + n] for n in _CHAR_GRAMS for i in range(len(padded) - n + 1)]
    features = [b"w" + word.encode(), *(b"c" + gram.encode() for gram in grams)]
    positions, signs = _hashed(key, edges, features)
    own = _FUNCTION_WORD_WEIGHT if function_word else _WORD_WEIGHT
    weights = np.repeat([own] + [_CHAR_GRAM_WEIGHT] * len(grams), len(edges) - 1)
    return _frozen(positions, signs * weights)


@lru_cache(maxsize=_WORD_CACHE)
def _token(key: bytes, edges: tuple[int, ...], token_id: int) -> tuple[Positions, Floats]:
    positions, signs = _hashed(key, edges, [b"t%d" % token_id])
    return _frozen(positions, signs * _WORD_WEIGHT)


def _frozen(positions: Positions, values: Floats) -> tuple[Positions, Floats]:
    """A cached block, read-only: every caller shares it."""
    positions.flags.writeable = False
    values.flags.writeable = False
    return positions, values


def _words(text: str) -> list[str]:
    words = [
        word[i : i + _WORD_PIECE_CHARS]
        for word in _WORD.findall(text.lower())
        for i in range(0, len(word), _WORD_PIECE_CHARS)
    ]
    return words or _SYMBOL.findall(text)


def _tf(count: int) -> float:
    return 1.0 + math.log(count)


def _features(key: bytes, edges: tuple[int, ...], item: EmbeddingInput) -> Iterable[tuple[Positions, Floats]]:
    """The input's hashed features, each block scaled by how often it occurs."""
    if isinstance(item, str):
        units: Sequence[str | int] = _words(item)
        singles = Counter(units)
        for unit, count in singles.items():
            positions, values = _word(key, edges, str(unit))
            yield positions, values * _tf(count)
        grams = Counter(
            f"{a} {b}".encode()
            for a, b in itertools.pairwise(units)
            if a not in _FUNCTION_WORDS or b not in _FUNCTION_WORDS
        )
        prefix = b"b"
    else:
        singles = Counter(item)
        for unit, count in singles.items():
            positions, values = _token(key, edges, int(unit))
            yield positions, values * _tf(count)
        grams = Counter(b"%d %d" % pair for pair in itertools.pairwise(item))
        grams.update(b"%d %d %d" % triple for triple in zip(item, item[1:], item[2:], strict=False))
        prefix = b"g"
    if not singles:
        yield _hashed(key, edges, [_EMPTY])
        return
    if grams:
        positions, signs = _hashed(key, edges, [prefix + gram for gram in grams])
        counts = np.repeat([_tf(count) for count in grams.values()], len(edges) - 1)
        yield positions, signs * counts * _BIGRAM_WEIGHT


@lru_cache(maxsize=64)
def _model_key(model: str) -> bytes:
    return hashlib.blake2b(model.encode(), digest_size=32).digest()


@lru_cache(maxsize=64)
def _band_scale(edges: tuple[int, ...]) -> Floats:
    """Each position's weight: the square root of its band's width (see the module docstring)."""
    widths = np.diff(np.array(edges, dtype=np.float64))
    return np.repeat(np.sqrt(widths), np.diff(np.array(edges)))


def embedding_vector(model: str, item: EmbeddingInput, dimensions: int) -> tuple[float, ...]:
    """The simulator's vector for ``item``: its hashed n-gram features in the model's full dimension, cut to
    ``dimensions`` and scaled to unit length, as float32 values (what a base64 answer carries exactly)."""
    shape = EMBEDDING_SHAPES.get(model)
    full = max(dimensions, shape.dimensions if shape is not None else dimensions)
    edges = _bands(full)
    blocks = list(_features(_model_key(model), edges, item))
    positions = np.concatenate([block[0] for block in blocks])
    values = np.concatenate([block[1] for block in blocks])
    vector = (np.bincount(positions, weights=values, minlength=full) * _band_scale(edges))[:dimensions]
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:  # features that cancel out exactly in a short cut: still a unit vector, the same every time
        vector = np.zeros(dimensions)
        vector[0] = 1.0
        norm = 1.0
    return tuple((vector / norm).astype(np.float32).tolist())
