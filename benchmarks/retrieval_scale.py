"""Search latency against the number of chunks in a store: full-text, vector and hybrid, side by side in one run.

For each size (1k, 10k, 50k chunks by default) a fresh database (SQLite in a temporary folder, or a new database on
the PostgreSQL server ``--postgres`` names) gets one store of that many chunks in 100 files, filled as ingestion fills
one: each chunk ~300 words drawn from the word frequencies of the Python reference topics (so common words are as
common as in prose), and a random unit vector of ``--dimensions`` (the arithmetic does not depend on the values).
Then ``--queries`` queries of 6 words drawn the same way (common words included: each matches most chunks), timed:

- ``full-text``: ``index.full_text_ranking`` (FTS5 ``bm25`` / ``ts_rank_cd``), top 100, in its own transaction;
- ``vector``: ``vectors.rank_by_cosine`` over the store's cached matrix, top 100 (``cold read``: reading the
  matrix from the database the first time, once);
- ``hybrid``: ``search_vector_stores`` end to end, matrix cached (store and file lookups, both lists, fusion, the
  hits' rows), the query embedded without the pool (its pool time is the embedding call's, measured elsewhere).

Medians and 95th percentiles in milliseconds, and each median as a multiple of the smallest size's. Benchmarks print;
they assert nothing.

    .venv/bin/python benchmarks/retrieval_scale.py [--sizes 1000 10000 50000] [--dimensions 1024]
        [--postgres postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval_support import BenchStore, build_store

from switchyard.platform.knowledge.search import search_vector_stores
from switchyard.platform.knowledge.search.index import full_text_ranking, query_terms
from switchyard.platform.knowledge.search.vectors import rank_by_cosine
from switchyard.platform.models import VectorStore

DATA = Path(__file__).resolve().parent / "data" / "retrieval" / "python_reference_topics.json"
MODEL = "Qwen/Qwen3-Embedding-8B"
FILES = 100
WORDS_PER_CHUNK = 300


class Words:
    """Words drawn with the frequencies they have in the reference topics."""

    def __init__(self, seed: int) -> None:
        topics = json.loads(DATA.read_text())["topics"]
        counts = Counter(re.findall(r"[a-z]+", " ".join(topics.values()).lower()))
        self.words = np.array(list(counts))
        weights = np.array(list(counts.values()), dtype=np.float64)
        self.p = weights / weights.sum()
        self.rng = np.random.default_rng(seed)

    def text(self, count: int) -> str:
        return " ".join(self.rng.choice(self.words, size=count, p=self.p))


def _documents(size: int, dimensions: int, words: Words) -> Iterator[tuple[str, Iterator[tuple[str, bytes]]]]:
    rng = np.random.default_rng(size)

    def chunks(count: int) -> Iterator[tuple[str, bytes]]:
        for _ in range(count):
            vector = rng.standard_normal(dimensions).astype("<f4")
            yield words.text(WORDS_PER_CHUNK), (vector / np.linalg.norm(vector)).astype("<f4").tobytes()

    for index in range(FILES):
        yield f"file-{index}.txt", chunks(size // FILES)


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(0.95 * (len(ordered) - 1))] * 1000


async def _measure(bench: BenchStore, dimensions: int, queries: list[str]) -> dict[str, Any]:
    from sqlalchemy import select

    deps = bench.deps()
    async with bench.database.unit_of_work(bench.scope) as session:
        store = (await session.execute(select(VectorStore))).scalar_one()
        started = time.perf_counter()
        matrix = await deps.matrices.matrix(session, bench.scope, store)
        cold_s = time.perf_counter() - started
    everyone = set(matrix.file_ids)
    rng = np.random.default_rng(7)
    timings: dict[str, list[float]] = {"full-text": [], "vector": [], "hybrid": []}
    for query in queries:
        started = time.perf_counter()
        async with bench.database.unit_of_work(bench.scope) as session:
            await full_text_ranking(
                session, bench.scope, store_ids=[bench.store_id], terms=query_terms([query]), file_ids=None, limit=100
            )
        timings["full-text"].append(time.perf_counter() - started)
        vector = rng.standard_normal(dimensions).astype(np.float32)
        started = time.perf_counter()
        await rank_by_cosine(matrix, vector / np.linalg.norm(vector), everyone, 100)
        timings["vector"].append(time.perf_counter() - started)
        started = time.perf_counter()
        await search_vector_stores(deps, bench.scope, [bench.store_id], query, api_key_id=None)
        timings["hybrid"].append(time.perf_counter() - started)
    return {"cold_ms": cold_s * 1000, "matrix_mb": matrix.nbytes / 1e6, **{k: _ms(v) for k, v in timings.items()}}


async def _run_size(size: int, dimensions: int, queries: list[str], postgres: str | None) -> dict[str, Any]:
    words = Words(seed=size)
    if postgres is None:
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite+aiosqlite:///{folder}/scale.db"
            bench = await build_store(url, _documents(size, dimensions, words), model=MODEL, dimensions=dimensions)
            try:
                return await _measure(bench, dimensions, queries)
            finally:
                await bench.database.dispose()
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from switchyard.platform.db import sync_url

    name = f"switchyard_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(sync_url(postgres), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        url = make_url(postgres).set(database=name).render_as_string(hide_password=False)
        bench = await build_store(url, _documents(size, dimensions, words), model=MODEL, dimensions=dimensions)
        try:
            return await _measure(bench, dimensions, queries)
        finally:
            await bench.database.dispose()
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


async def main(sizes: list[int], dimensions: int, count: int, postgres: str | None) -> None:
    queries = _queries(count)
    layout = "PostgreSQL" if postgres else "SQLite"
    print(f"{layout}, {dimensions} dimensions, {count} queries of 6 words, top 100 a list; ms: median / p95")
    print(
        f"{'chunks':>7} {'full-text':>15} {'vector':>15} {'hybrid':>15} {'cold read':>10} {'matrix MB':>10}"
        f"   {'x full-text':>11} {'x vector':>9} {'x hybrid':>9}"
    )
    base: dict[str, float] | None = None
    for size in sizes:
        row = await _run_size(size, dimensions, queries, postgres)
        medians = {k: row[k][0] for k in ("full-text", "vector", "hybrid")}
        base = base or medians
        cells = " ".join(f"{row[k][0]:>7.1f} / {row[k][1]:>5.1f}" for k in ("full-text", "vector", "hybrid"))
        ratios = " ".join(f"{medians[k] / base[k]:>9.1f}x" for k in ("full-text", "vector", "hybrid"))
        print(f"{size:>7} {cells} {row['cold_ms']:>10.0f} {row['matrix_mb']:>10.1f}   {ratios}")


def _queries(count: int) -> list[str]:
    words = Words(seed=1)
    return [words.text(6) for _ in range(count)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    parser.add_argument("--dimensions", type=int, default=1024)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL server URL (default: SQLite)")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.sizes, arguments.dimensions, arguments.queries, arguments.postgres))
