"""What the retrieval benchmarks share: a migrated database holding one tenant's vector store, filled as ingestion
fills one (chunks embedded with the simulator's vectors), and an embedder of queries that skips the pool.

Nothing here asserts: ``retrieval.py`` (quality) and ``retrieval_scale.py`` (latency) print tables.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import create_engine, insert

from switchyard.accelerator.pool import embedding_vector
from switchyard.platform.db import UNSCOPED, Database, TenantScope, sync_url
from switchyard.platform.db.migrate import upgrade
from switchyard.platform.knowledge.chunking import chunk_text
from switchyard.platform.knowledge.search import SearchDeps, StoreMatrixCache
from switchyard.platform.models import KnowledgeChunk, StoredFile, Tenant, VectorStore, VectorStoreFile

__all__ = ["BenchStore", "LocalEmbedder", "build_store", "vector_bytes"]

_ids = itertools.count()


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):08d}{hashlib.sha1(prefix.encode()).hexdigest()[:8]}"


def vector_bytes(model: str, text: str, dimensions: int) -> bytes:
    """A chunk's stored vector, exactly as ingestion stores the pool's answer."""
    return np.asarray(embedding_vector(model, text, dimensions), dtype="<f4").tobytes()


class LocalEmbedder:
    """Queries embedded by the simulator's function directly (the pool's vectors, without admission or billing)."""

    async def __call__(
        self, scope: TenantScope, *, api_key_id: str | None, model: str, dimensions: int, texts: Sequence[str]
    ) -> list[npt.NDArray[np.float32]]:
        return [np.asarray(embedding_vector(model, text, dimensions), dtype=np.float32) for text in texts]


@dataclass
class BenchStore:
    database: Database
    scope: TenantScope
    store_id: str
    file_names: dict[str, str] = field(default_factory=dict)  # file id -> document name
    chunks: int = 0

    def deps(self, cache_bytes: int = 2 << 30) -> SearchDeps:
        return SearchDeps(database=self.database, embed=LocalEmbedder(), matrices=StoreMatrixCache(cache_bytes))


async def build_store(
    database_url: str,
    documents: Iterable[tuple[str, Iterable[tuple[str, bytes | None]]]] | dict[str, str],
    *,
    model: str,
    dimensions: int,
    batch: int = 2000,
) -> BenchStore:
    """A migrated database at ``database_url`` with a tenant and one vector store of ``documents``: a mapping of
    name to text (chunked with OpenAI's default strategy, each chunk embedded), or ``(name, [(chunk text, vector
    bytes or None to embed it)])`` pairs for chunks made by the caller."""
    upgrade(database_url)
    database = Database(database_url)
    tenant_id = _id("ten")
    async with database.unit_of_work(UNSCOPED) as session:
        session.add(Tenant(id=tenant_id, name="bench"))
    scope = TenantScope(tenant_id)
    bench = BenchStore(database, scope, _id("vs"))
    async with database.unit_of_work(scope) as session:
        session.add(VectorStore(id=bench.store_id, tenant_id=tenant_id, embedding_model=model, dimensions=dimensions))
    if isinstance(documents, dict):
        items: Iterable[tuple[str, Iterable[tuple[str, bytes | None]]]] = (
            (name, ((chunk.text, None) for chunk in chunk_text(text))) for name, text in documents.items()
        )
    else:
        items = documents
    rows: list[dict[str, Any]] = []
    for name, chunks in items:
        file_id = _id("file")
        bench.file_names[file_id] = name
        async with database.unit_of_work(scope) as session:
            session.add(
                StoredFile(id=file_id, tenant_id=tenant_id, filename=name, purpose="assistants", bytes=0, sha256="")
            )
            await session.flush()
            session.add(
                VectorStoreFile(
                    row_id=_id("vsf"),
                    tenant_id=tenant_id,
                    vector_store_id=bench.store_id,
                    file_id=file_id,
                    status="completed",
                )
            )
        start = 0
        for position, (text, vector) in enumerate(chunks):
            rows.append(
                {
                    "id": _id("chunk"),
                    "tenant_id": tenant_id,
                    "vector_store_id": bench.store_id,
                    "file_id": file_id,
                    "position": position,
                    "text": text,
                    "tokens": len(text) // 4,
                    "char_start": start,
                    "char_end": start + len(text),
                    "embedding": vector if vector is not None else vector_bytes(model, text, dimensions),
                }
            )
            start += len(text)
            if len(rows) >= batch:
                await _insert(database, scope, rows)
                bench.chunks += len(rows)
                rows = []
    if rows:
        await _insert(database, scope, rows)
        bench.chunks += len(rows)
    if not database.is_sqlite:  # what autovacuum does after a bulk load: the planner's statistics
        engine = create_engine(sync_url(database_url), isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.exec_driver_sql("VACUUM ANALYZE")
        engine.dispose()
    return bench


async def _insert(database: Database, scope: TenantScope, rows: list[dict[str, Any]]) -> None:
    async with database.unit_of_work(scope) as session:
        await session.execute(insert(KnowledgeChunk), rows)
