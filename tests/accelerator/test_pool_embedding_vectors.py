"""The simulator's embedding vectors (issue 25): hashed n-grams whose cosine follows shared words, deterministic in
every process, Matryoshka by construction, and bounded work per input token."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from switchyard.accelerator.pool import embeddings
from switchyard.accelerator.pool.embeddings import MAX_FEATURES_PER_TOKEN, embedding_vector
from switchyard.accelerator.pool.tokens import count_tokens

BGE = "BAAI/bge-large-en-v1.5"
QWEN = "Qwen/Qwen3-Embedding-8B"
SMALLEST = 32  # Qwen3-Embedding-8B's min_dimensions

DOCUMENTS = [
    "The cat sat on the mat and purred quietly in the afternoon sun.",
    "Trainium2 chips have 96 GiB of HBM and connect over NeuronLink in a 2D torus.",
    "Invoices are finalized at the end of each calendar month in UTC.",
    "The password reset link expires after thirty minutes for security reasons.",
    "Rate limits are enforced per API key using the GCRA algorithm in Redis.",
    "Vector stores hold chunks of uploaded files for retrieval with file search.",
    "Our quarterly revenue grew by twelve percent compared with last year.",
    "To bake sourdough bread, feed the starter the night before baking.",
    "The football match was postponed because of heavy rain at the stadium.",
    "Python's asyncio event loop runs coroutines cooperatively on one thread.",
]
PARAPHRASES = [  # each shares some words (or word pieces) with its document, and little with the others
    "a cat purred on the mat in the sun",
    "how much HBM does a Trainium2 chip have",
    "when are invoices finalized each month",
    "password reset link expiry",
    "rate limit per API key",
    "what do vector stores hold",
    "revenue growth this quarter",
    "feeding a sourdough starter",
    "was the football match postponed",
    "asyncio event loop coroutines",
]


def _matrix(model: str, texts: list[str], dimensions: int) -> np.ndarray:
    return np.array([embedding_vector(model, text, dimensions) for text in texts])


@pytest.mark.parametrize(("model", "dimensions"), [(QWEN, 4096), (QWEN, 256), (QWEN, SMALLEST), (BGE, 1024)])
def test_a_paraphrase_sharing_words_is_nearer_than_every_unrelated_text(model: str, dimensions: int) -> None:
    similarity = _matrix(model, PARAPHRASES, dimensions) @ _matrix(model, DOCUMENTS, dimensions).T
    nearest = similarity.argmax(axis=1)
    assert list(nearest) == list(range(len(DOCUMENTS)))
    unrelated = similarity[~np.eye(len(DOCUMENTS), dtype=bool)]
    if dimensions >= 256:  # with room to spare, not by a hair
        assert np.diag(similarity).min() > unrelated.max() > 0.0


def test_texts_without_a_shared_word_or_word_piece_are_nearly_orthogonal() -> None:
    """What the vectors are not: semantic. A synonym shares no feature, so it is no nearer than chance."""
    car, automobile = (np.array(embedding_vector(QWEN, text, 4096)) for text in ("car", "automobile"))
    assert abs(float(car @ automobile)) < 0.1
    same = np.array(embedding_vector(QWEN, "Car!", 4096))
    assert float(car @ same) > 0.99  # case and punctuation do not matter


def _filler(index: int, words: int) -> str:
    """Deterministic prose-like filler: common words in a per-chunk order."""
    vocabulary = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "that",
        "for",
        "it",
        "as",
        "with",
        "was",
        "on",
        "be",
        "by",
        "this",
        "are",
        "from",
        "at",
        "or",
        "an",
        "have",
        "not",
        "which",
        "but",
        "system",
        "request",
        "model",
        "chip",
        "memory",
        "token",
        "batch",
        "queue",
        "tenant",
        "budget",
        "invoice",
        "latency",
        "replica",
        "fleet",
        "cluster",
        "server",
        "client",
        "answer",
        "store",
        "file",
        "search",
        "vector",
        "chunk",
        "overlap",
        "text",
        "document",
        "page",
        "worker",
    ]
    digest = hashlib.sha256(str(index).encode()).digest() * (words // 32 + 1)
    return " ".join(vocabulary[digest[i] % len(vocabulary)] for i in range(words))


@pytest.mark.parametrize(
    ("model", "dimensions", "words"),
    [(QWEN, 4096, 600), (QWEN, 512, 300), (BGE, 1024, 300)],  # BGE encodes 512 tokens at most: shorter chunks
)
def test_the_chunk_holding_a_unique_phrase_is_nearest_to_a_query_with_that_phrase(
    model: str, dimensions: int, words: int
) -> None:
    chunks = [_filler(n, words) for n in range(40)]
    chunks[23] = _filler(23, words // 2) + " The zircon heron protocol rotates keys nightly. " + _filler(99, words // 2)
    assert max(count_tokens(chunk) for chunk in chunks) <= (512 if model == BGE else 1000)
    similarity = _matrix(model, chunks, dimensions) @ np.array(
        embedding_vector(model, "What does the zircon heron protocol do?", dimensions)
    )
    ranking = np.argsort(-similarity)
    assert ranking[0] == 23
    assert similarity[23] > 1.5 * similarity[ranking[1]]  # a clear first, not a coin toss


def test_a_shorter_vector_is_the_start_of_the_longer_one_rescaled() -> None:
    text = "Matryoshka vectors nest: the first positions carry the most."
    full = np.array(embedding_vector(QWEN, text, 4096))
    for dimensions in (SMALLEST, 100, 1000, 2048):
        cut = np.array(embedding_vector(QWEN, text, dimensions))
        assert cut.shape == (dimensions,)
        assert abs(np.linalg.norm(cut) - 1) < 1e-5
        assert np.allclose(full[:dimensions] / np.linalg.norm(full[:dimensions]), cut, atol=1e-6)


def test_token_id_inputs_are_near_when_they_share_token_n_grams() -> None:
    base = tuple(range(100, 200))
    edited = (*base[:90], 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
    other = tuple(range(1000, 1100))
    vectors = {
        name: np.array(embedding_vector(QWEN, ids, 4096)) for name, ids in [("b", base), ("e", edited), ("o", other)]
    }
    assert float(vectors["b"] @ vectors["e"]) > 0.7
    assert abs(float(vectors["b"] @ vectors["o"])) < 0.1
    # token ids are their own features: the ids of a text's characters are not the text
    assert embedding_vector(QWEN, (104, 105), 64) != embedding_vector(QWEN, "hi", 64)


@pytest.mark.parametrize("item", ["", "   \n", "!!! ???", (), (0,)])
def test_inputs_without_words_still_get_a_deterministic_unit_vector(item: str | tuple[int, ...]) -> None:
    vector = embedding_vector(QWEN, item, SMALLEST)
    assert vector == embedding_vector(QWEN, item, SMALLEST)
    assert abs(np.linalg.norm(vector) - 1) < 1e-5


def test_two_models_place_the_same_text_differently() -> None:
    a = np.array(embedding_vector(QWEN, "the same text", 1024))
    b = np.array(embedding_vector(BGE, "the same text", 1024))
    assert abs(float(a @ b)) < 0.2


PROBES: list[Any] = ["Deterministic across processes: blake2b, not hash().", [5, 6, 7, 8]]


def test_vectors_are_the_same_in_another_process_with_another_hash_seed() -> None:
    script = (
        "import json, sys\n"
        "from switchyard.accelerator.pool.embeddings import embedding_vector\n"
        "probes = json.loads(sys.argv[1])\n"
        "items = [p if isinstance(p, str) else tuple(p) for p in probes]\n"
        "print(json.dumps([embedding_vector(sys.argv[2], item, 64) for item in items]))\n"
    )
    here = [list(embedding_vector(QWEN, p if isinstance(p, str) else tuple(p), 64)) for p in PROBES]
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(PROBES), QWEN],
            env=env,
            capture_output=True,
            check=True,
            text=True,
        )
        assert json.loads(out.stdout) == here  # float32 values survive JSON exactly


def _counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = hashlib.blake2b

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(embeddings.hashlib, "blake2b", counted)
    return calls


@pytest.mark.parametrize(
    "item",
    [
        " ".join(_filler(n, 200) for n in range(40)),  # ~8k tokens of prose
        "".join(chr(0x4E00 + i % 5000) for i in range(40_000)),  # 40,000 characters without a space
        "x" * 10_000 + " " + "ab,cd;" * 2_000,  # one long run, then short words and symbols
        "!?" * 5_000,  # symbols only
        tuple(i % 50_000 for i in range(0, 8192 * 7, 7)),  # 8k token ids
    ],
    ids=["prose", "no-spaces", "mixed", "symbols", "token-ids"],
)
def test_the_hashing_work_is_bounded_by_the_input_tokens(monkeypatch: pytest.MonkeyPatch, item: Any) -> None:
    """The expensive step is hashing a feature; the features of an input are at most a constant per token, so an
    input's cost is linear in its length whatever it holds (no timing: the work is counted)."""
    embeddings._word.cache_clear()
    embeddings._token.cache_clear()
    calls = _counting_hashes(monkeypatch)
    tokens = count_tokens(item) if isinstance(item, str) else len(item)
    embedding_vector(QWEN, item, 4096)
    assert 0 < calls[0] <= MAX_FEATURES_PER_TOKEN * tokens + 1
    first = calls[0]
    embedding_vector(QWEN, item, 4096)  # its words are hashed once per process: only its pairs again
    assert calls[0] - first < first
