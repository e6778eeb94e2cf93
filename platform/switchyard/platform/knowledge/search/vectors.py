"""The vector half of search: exact cosine similarity over a store's chunks, from a per-process matrix cache.

A store's chunk vectors are unit length (float32, the store's ``dimensions``), so cosine similarity is one matrix
product. The matrix of a store is read from ``knowledge_chunks`` once and kept per process under ``(store id,
revision)`` (ingestion bumps the revision whenever the store's chunks change, so a changed store is read again);
the cache is bounded in bytes and drops the least recently used store first. A store read while its revision moved
is used for that search and not kept. Built for up to about 100,000 chunks a store at 256-1,024 dimensions (100 to
400 MB of float32 at 100k x 1,024): a search there is tens of milliseconds of arithmetic, off the event loop; the
first search of a store (or after a change) reads all its vectors (see ``benchmarks/retrieval_scale.py``).
No pgvector: this machine's PostgreSQL has no such extension, and one exact pass per store serves both layouts the
same way (an approximate index is for stores past this scale).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.models import KnowledgeChunk, VectorStore

__all__ = ["DEFAULT_CACHE_BYTES", "StoreMatrix", "StoreMatrixCache", "rank_by_cosine"]

DEFAULT_CACHE_BYTES = 512 * 1024 * 1024
OFF_LOOP_VALUES = 2_000_000
"""A product over more values than this (rows x dimensions) runs in a thread, so the loop serves others meanwhile."""
_ID_BYTES = 100  # what a chunk id and its file's index cost beside the vector (a Python str in an object array)


@dataclass(frozen=True)
class StoreMatrix:
    """A store's chunks as rows: their ids, their files (as indexes into ``file_ids``) and unit vectors."""

    chunk_ids: npt.NDArray[np.object_]
    file_index: npt.NDArray[np.int32]
    file_ids: tuple[str, ...]
    vectors: npt.NDArray[np.float32]

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes + self.file_index.nbytes + len(self.chunk_ids) * _ID_BYTES)


async def _read(session: AsyncSession, scope: TenantScope, store_id: str, dimensions: int) -> StoreMatrix:
    rows = (
        await session.execute(
            select(col(KnowledgeChunk.id), col(KnowledgeChunk.file_id), col(KnowledgeChunk.embedding))
            .where(col(KnowledgeChunk.tenant_id) == scope.tenant_id, col(KnowledgeChunk.vector_store_id) == store_id)
            .order_by(col(KnowledgeChunk.id))
        )
    ).all()
    width = dimensions * 4
    rows = [row for row in rows if len(row[2]) == width]  # a vector of another length is no vector of this store
    files: dict[str, int] = {}
    file_index = np.fromiter((files.setdefault(row[1], len(files)) for row in rows), dtype=np.int32, count=len(rows))
    vectors = np.frombuffer(b"".join(row[2] for row in rows), dtype="<f4").reshape(len(rows), dimensions)
    chunk_ids = np.empty(len(rows), dtype=object)
    chunk_ids[:] = [row[0] for row in rows]
    return StoreMatrix(chunk_ids, file_index, tuple(files), vectors.astype(np.float32, copy=False))


class StoreMatrixCache:
    """Stores' matrices by ``(store id, revision)``, at most ``max_bytes`` of them, least recently used out first."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, int], StoreMatrix] = OrderedDict()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    async def matrix(self, session: AsyncSession, scope: TenantScope, store: VectorStore) -> StoreMatrix:
        """``store``'s matrix (``store``: a row the caller read in ``scope``, which proves it is the tenant's)."""
        key = (store.id, store.revision)
        cached = self._entries.get(key)
        if cached is not None:
            self._entries.move_to_end(key)
            return cached
        matrix = await _read(session, scope, store.id, store.dimensions)
        revision = (
            await session.execute(select(col(VectorStore.revision)).where(col(VectorStore.id) == store.id))
        ).scalar()
        if revision == store.revision:  # not changed while it was read: keep it
            self._put(key, matrix)
        return matrix

    def _put(self, key: tuple[str, int], matrix: StoreMatrix) -> None:
        for old in [k for k in self._entries if k[0] == key[0]]:  # an older revision of the store is no use now
            self._bytes -= self._entries.pop(old).nbytes
        if matrix.nbytes > self.max_bytes:
            return
        self._entries[key] = matrix
        self._bytes += matrix.nbytes
        while self._bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.nbytes

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0


PROCESS_MATRICES = StoreMatrixCache()
"""This process's cache (each API process and worker has its own)."""


def _top(
    matrix: StoreMatrix, query: npt.NDArray[np.float32], allowed_files: npt.NDArray[np.bool_], limit: int
) -> list[tuple[str, float]]:
    if not len(matrix.chunk_ids):
        return []
    scores = np.einsum("ij,j->i", matrix.vectors, query)  # one thread: BLAS's threads stall on a busy host
    scores[~allowed_files[matrix.file_index]] = -np.inf
    count = min(limit, len(scores))
    best = np.argpartition(-scores, count - 1)[:count]
    best = best[np.lexsort((matrix.chunk_ids[best].astype(str), -scores[best]))]
    return [(str(matrix.chunk_ids[i]), float(scores[i])) for i in best if np.isfinite(scores[i])]


async def rank_by_cosine(
    matrix: StoreMatrix, query: npt.NDArray[np.float32], allowed_files: set[str], limit: int
) -> list[tuple[str, float]]:
    """The ``limit`` chunks of ``matrix`` (of ``allowed_files`` only) most similar to ``query``, best first, with
    their cosine similarity."""
    allowed = np.fromiter((file_id in allowed_files for file_id in matrix.file_ids), dtype=bool)
    if not allowed.any():
        return []
    if matrix.vectors.size > OFF_LOOP_VALUES:
        return await asyncio.to_thread(_top, matrix, query, allowed, limit)
    return _top(matrix, query, allowed, limit)
