"""Retrieval quality of vector store search: recall@5 and MRR of full-text, vector and hybrid rankings.

The collection is the Python Language Reference's 78 topics (``benchmarks/data/retrieval``, PSF licence), each one
file of a vector store, chunked with OpenAI's default strategy (800 tokens, 400 overlap) and embedded with the
simulator's vectors (``Qwen/Qwen3-Embedding-8B``'s, cut to each dimension measured), in a SQLite database migrated to
head, exactly as ingestion stores them. Two sets of questions, whose relevant topics are known by construction:

- ``hand``: 45 questions written by hand as a user would ask them (``questions.json``), naming their topic;
- ``made``: one per topic, made mechanically from the topic's own text: its sentence of 8-40 words with the most
  distinct words of 5+ letters, reduced to every other word of 4+ letters (a keyword query that shares words with
  the page but is not a phrase of it).

A question's relevant topics are its topic and every topic whose text contains it (``compound`` contains ``for``,
``while``, ``try``...; for a made question: every topic containing its sentence). A ranking of chunks becomes a
ranking of topics (each topic at its best chunk's rank); recall@5: a relevant topic among the first five; MRR: the
mean of 1/rank of the first relevant topic (0 past 50). Full-text and vector are each list alone
(``index.full_text_ranking``, ``vectors.rank_by_cosine``), hybrid is ``search_vector_stores`` (their fusion).

    .venv/bin/python benchmarks/retrieval.py [--dimensions 256 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval_support import BenchStore, build_store

from switchyard.accelerator.pool import embedding_vector
from switchyard.platform.knowledge.search import search_vector_stores
from switchyard.platform.knowledge.search.index import full_text_ranking, query_terms
from switchyard.platform.knowledge.search.vectors import rank_by_cosine
from switchyard.platform.models import VectorStore

DATA = Path(__file__).resolve().parent / "data" / "retrieval"
MODEL = "Qwen/Qwen3-Embedding-8B"
DEPTH = 50
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def load() -> tuple[dict[str, str], list[tuple[str, str, set[str]]]]:
    """The topics, and the questions as ``(set, text, relevant topics)``."""
    topics: dict[str, str] = json.loads((DATA / "python_reference_topics.json").read_text())["topics"]
    questions: list[tuple[str, str, set[str]]] = []
    for text, topic in json.loads((DATA / "questions.json").read_text())["questions"]:
        body = topics[topic].strip()
        questions.append(("hand", text, {name for name, other in topics.items() if body in other}))
    for topic, body in topics.items():
        sentences = [" ".join(s.split()) for s in _SENTENCE.split(body)]
        sentences = [s for s in sentences if 8 <= len(s.split()) <= 40]
        if not sentences:
            continue
        sentence = max(sentences, key=lambda s: (len({w for w in re.findall(r"[a-z]{5,}", s.lower())}), s))
        words = re.findall(r"[A-Za-z]{4,}", sentence)[::2]
        flat = {name for name, other in topics.items() if sentence in " ".join(other.split())}
        questions.append(("made", " ".join(words), flat | {topic}))
    return topics, questions


def _topics(chunk_ids: Sequence[str], topic_of_chunk: dict[str, str]) -> list[str]:
    return list(dict.fromkeys(topic_of_chunk[c] for c in chunk_ids))


def _scores(ranked: list[str], relevant: set[str]) -> tuple[float, float]:
    first = next((i for i, topic in enumerate(ranked[:DEPTH], start=1) if topic in relevant), None)
    return (1.0 if first is not None and first <= 5 else 0.0), (1.0 / first if first else 0.0)


async def measure(bench: BenchStore, questions: list[tuple[str, str, set[str]]], dimensions: int) -> dict[str, Any]:
    from sqlalchemy import select, text

    deps = bench.deps()
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    async with bench.database.unit_of_work(bench.scope) as session:
        store = (await session.execute(select(VectorStore))).scalar_one()
        matrix = await deps.matrices.matrix(session, bench.scope, store)
        rows = await session.execute(text("SELECT id, file_id FROM knowledge_chunks"))
        topic_of_chunk = {row[0]: bench.file_names[row[1]] for row in rows}
    everyone = set(matrix.file_ids)
    for kind, question, relevant in questions:
        async with bench.database.unit_of_work(bench.scope) as session:
            words = await full_text_ranking(
                session,
                bench.scope,
                store_ids=[bench.store_id],
                terms=query_terms([question]),
                file_ids=None,
                limit=DEPTH * 4,
            )
        vector = np.asarray(embedding_vector(MODEL, question, dimensions), dtype=np.float32)
        similar = await rank_by_cosine(matrix, vector, everyone, DEPTH * 4)
        hits = await search_vector_stores(
            deps, bench.scope, [bench.store_id], question, api_key_id=None, max_num_results=50
        )
        rankings = {
            "full-text": _topics([w[0] for w in words], topic_of_chunk),
            "vector": _topics([s[0] for s in similar], topic_of_chunk),
            "hybrid": _topics([h.chunk_id for h in hits], topic_of_chunk),
        }
        for method, ranked in rankings.items():
            for group in (kind, "all"):
                results.setdefault((group, method), []).append(_scores(ranked, relevant))
    return {
        key: (float(np.mean([r for r, _ in v])), float(np.mean([m for _, m in v])), len(v))
        for key, v in results.items()
    }


async def main(dimensions: list[int]) -> None:
    topics, questions = load()
    print(
        f"{len(topics)} topics, {len(questions)} questions "
        f"({sum(q[0] == 'hand' for q in questions)} hand-written, {sum(q[0] == 'made' for q in questions)} made)"
    )
    print(f"{'dims':>5} {'questions':<10} {'method':<10} {'recall@5':>9} {'MRR':>7}")
    for size in dimensions:
        with tempfile.TemporaryDirectory() as folder:
            bench = await build_store(f"sqlite+aiosqlite:///{folder}/bench.db", topics, model=MODEL, dimensions=size)
            try:
                table = await measure(bench, questions, size)
            finally:
                await bench.database.dispose()
        for group in ("hand", "made", "all"):
            for method in ("full-text", "vector", "hybrid"):
                recall, mrr, count = table[(group, method)]
                print(f"{size:>5} {group + f' ({count})':<10} {method:<10} {recall:>9.3f} {mrr:>7.3f}")
        print(f"      ({bench.chunks} chunks)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dimensions", type=int, nargs="+", default=[256, 1024])
    asyncio.run(main(parser.parse_args().dimensions))
