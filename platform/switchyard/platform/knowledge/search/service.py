"""Hybrid search over a tenant's vector stores: full-text and vector rankings fused by reciprocal rank fusion.

For each query, two ranked lists of at most ``CANDIDATES`` chunks: full-text (``index``) and cosine similarity of
the query's embedding (``vectors``; the query is embedded once per model and dimensions of the stores searched, and
billed as ``/v1/embeddings`` bills). A chunk's fused score is ``sum(1 / (RRF_K + rank))`` over the lists it is in,
divided by the most any chunk could get (first in every list), so scores are in (0, 1] and ``score_threshold`` keeps
the chunks that rank high in several lists. Only chunks of files whose ingestion completed are searched, and only
files whose ``attributes`` pass ``filters``. There is no re-ranker: every ``ranker`` fuses the same way, and the
query is never rewritten. Stores are read in the caller's tenant scope (a store of another tenant is not found), and
no transaction is open while the query is embedded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import Database, TenantScope
from switchyard.platform.http.errors import InvalidRequest, NotFound
from switchyard.platform.inference.gateway import InferenceGateway
from switchyard.platform.knowledge.search.embedding import GatewayEmbedder, QueryEmbedder
from switchyard.platform.knowledge.search.filters import Filter, matches, parse_filter
from switchyard.platform.knowledge.search.index import full_text_ranking, query_terms
from switchyard.platform.knowledge.search.vectors import PROCESS_MATRICES, StoreMatrixCache, rank_by_cosine
from switchyard.platform.knowledge.vector_stores.policy import touch
from switchyard.platform.models import StoredFile, VectorStore, VectorStoreFile, utc_now

__all__ = [
    "CANDIDATES",
    "MAX_NUM_RESULTS",
    "RRF_K",
    "SearchDeps",
    "SearchHit",
    "fuse",
    "search_vector_stores",
]

RRF_K = 60
CANDIDATES = 100  # per ranked list: past rank 100 a chunk adds under 1/160 to a fused score
MAX_NUM_RESULTS = 50
MAX_STORES = 10
MAX_QUERIES = 10
MAX_QUERY_CHARS = 4096
ACTIVITY_RESOLUTION = timedelta(minutes=1)
"""A store's ``last_active_at`` moves on a search at most this often (a search writes at most once a minute)."""


@dataclass(frozen=True)
class SearchHit:
    """A chunk a search found: its store, file, place in the file (for citations) and fused score in (0, 1]."""

    vector_store_id: str
    file_id: str
    filename: str
    score: float
    attributes: dict[str, Any]
    text: str
    position: int
    char_start: int
    char_end: int
    chunk_id: str

    @property
    def content(self) -> list[dict[str, str]]:
        """The chunk as OpenAI's search result content: ``[{"type": "text", "text": ...}]``."""
        return [{"type": "text", "text": self.text}]


@dataclass(frozen=True)
class SearchDeps:
    """What a search needs: the database, the embedder of its queries and this process's matrix cache."""

    database: Database
    embed: QueryEmbedder
    matrices: StoreMatrixCache = field(default=PROCESS_MATRICES)

    @classmethod
    def of_gateway(cls, gateway: InferenceGateway) -> SearchDeps:
        """An API process's: its gateway's database, and queries embedded through the gateway."""
        return cls(database=gateway.database, embed=GatewayEmbedder(gateway))


@dataclass(frozen=True)
class _File:
    filename: str
    attributes: dict[str, Any]


def fuse(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ``rankings`` (ids best first): ids by fused score, normalised to (0, 1]."""
    if not rankings:
        return []
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, chunk_id in enumerate(ranking, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
    best = len(rankings) / (k + 1)
    return sorted(
        ((chunk_id, score / best) for chunk_id, score in scores.items()), key=lambda item: (-item[1], item[0])
    )


def _validated(
    vector_store_ids: Sequence[str], queries: Sequence[str], max_num_results: int, score_threshold: float
) -> None:
    if not 1 <= len(vector_store_ids) <= MAX_STORES:
        raise InvalidRequest(f"search 1 to {MAX_STORES} vector stores", param="vector_store_ids")
    if not 1 <= len(queries) <= MAX_QUERIES or any(not q.strip() or len(q) > MAX_QUERY_CHARS for q in queries):
        raise InvalidRequest(
            f"query is 1 to {MAX_QUERIES} texts, each not blank and at most {MAX_QUERY_CHARS} characters",
            param="query",
        )
    if not 1 <= max_num_results <= MAX_NUM_RESULTS:
        raise InvalidRequest(f"max_num_results is from 1 to {MAX_NUM_RESULTS}", param="max_num_results")
    if not 0.0 <= score_threshold <= 1.0:
        raise InvalidRequest("score_threshold is from 0 to 1", param="ranking_options.score_threshold")


async def _stores_and_files(
    session: AsyncSession, scope: TenantScope, store_ids: Sequence[str], condition: Filter | None
) -> tuple[list[VectorStore], dict[tuple[str, str], _File]]:
    stores = (
        await session.execute(
            select(VectorStore).where(
                col(VectorStore.tenant_id) == scope.tenant_id,
                col(VectorStore.id).in_(store_ids),
                col(VectorStore.deleted_at).is_(None),
            )
        )
    ).scalars()
    by_id = {store.id: store for store in stores}
    for store_id in store_ids:
        if store_id not in by_id:
            raise NotFound(f"No vector store found with id '{store_id}'.", param="vector_store_id")
    now = utc_now()
    for store in by_id.values():  # a search is activity: a store that expires after being idle lives on
        if store.last_active_at is None or now - store.last_active_at > ACTIVITY_RESOLUTION:
            touch(store)
    rows = await session.execute(
        select(
            col(VectorStoreFile.vector_store_id),
            col(VectorStoreFile.file_id),
            col(VectorStoreFile.attributes),
            col(StoredFile.filename),
        )
        .join(StoredFile, col(StoredFile.id) == col(VectorStoreFile.file_id))
        .where(
            col(VectorStoreFile.tenant_id) == scope.tenant_id,
            col(VectorStoreFile.vector_store_id).in_(store_ids),
            col(VectorStoreFile.status) == "completed",
            col(StoredFile.deleted_at).is_(None),
        )
    )
    files = {
        (store_id, file_id): _File(filename, dict(attributes or {}))
        for store_id, file_id, attributes, filename in rows
        if matches(condition, attributes or {})
    }
    return [by_id[store_id] for store_id in dict.fromkeys(store_ids)], files


async def search_vector_stores(
    deps: SearchDeps,
    scope: TenantScope,
    vector_store_ids: Sequence[str],
    query: str | Sequence[str],
    *,
    api_key_id: str | None,
    max_num_results: int = 10,
    filters: Mapping[str, Any] | Filter | None = None,
    score_threshold: float = 0.0,
) -> list[SearchHit]:
    """The ``max_num_results`` best chunks of ``vector_store_ids`` (the tenant's; 404 for any other) for ``query``
    (one text or several, fused together), of files passing ``filters``, scoring at least ``score_threshold``.
    The query's embedding is billed to the tenant and ``api_key_id``; a search with no file to look in embeds
    nothing and finds nothing."""
    queries = [query] if isinstance(query, str) else list(query)
    _validated(vector_store_ids, queries, max_num_results, score_threshold)
    condition = parse_filter(filters) if isinstance(filters, Mapping) else filters
    async with deps.database.unit_of_work(scope) as session:
        stores, files = await _stores_and_files(session, scope, vector_store_ids, condition)
    if not files:
        return []
    embeddings: dict[tuple[str, int], list[np.ndarray[Any, Any]]] = {}
    for store in stores:  # one embedding call per model and length, outside any transaction
        shape = (store.embedding_model, store.dimensions)
        if shape not in embeddings:
            embeddings[shape] = await deps.embed(
                scope, api_key_id=api_key_id, model=shape[0], dimensions=shape[1], texts=queries
            )
    rankings: list[list[str]] = []
    async with deps.database.unit_of_work(scope) as session:
        file_ids = {file_id for _, file_id in files}
        for index, query_text in enumerate(queries):
            found = await full_text_ranking(
                session,
                scope,
                store_ids=[store.id for store in stores],
                terms=query_terms([query_text]),
                file_ids=file_ids if condition is not None else None,
                limit=CANDIDATES,
            )
            rankings.append([chunk_id for chunk_id, store_id, file_id in found if (store_id, file_id) in files])
            similar: list[tuple[str, float]] = []
            for store in stores:
                matrix = await deps.matrices.matrix(session, scope, store)
                allowed = {file_id for store_id, file_id in files if store_id == store.id}
                vector = embeddings[(store.embedding_model, store.dimensions)][index]
                similar += await rank_by_cosine(matrix, vector, allowed, CANDIDATES)
            similar.sort(key=lambda item: (-item[1], item[0]))
            rankings.append([chunk_id for chunk_id, _ in similar[:CANDIDATES]])
        fused = [(chunk_id, score) for chunk_id, score in fuse(rankings) if score >= score_threshold]
        return await _hits(session, scope, fused, files, max_num_results)


_CHUNKS = text(
    # ``|| ''``: the primary key finds the rows; without statistics SQLite would walk the tenant's index instead
    "SELECT id, vector_store_id, file_id, position, text, char_start, char_end FROM knowledge_chunks "
    "WHERE id IN :ids AND tenant_id || '' = :tenant"
).bindparams(bindparam("ids", expanding=True))


async def _hits(
    session: AsyncSession,
    scope: TenantScope,
    fused: list[tuple[str, float]],
    files: dict[tuple[str, str], _File],
    limit: int,
) -> list[SearchHit]:
    wanted = fused[: limit + 8]  # a few spare: a chunk whose file left the store since it was ranked is dropped
    params = {"ids": [chunk_id for chunk_id, _ in wanted], "tenant": scope.tenant_id}
    chunks = {row.id: row for row in await session.execute(_CHUNKS, params)}
    hits: list[SearchHit] = []
    for chunk_id, score in wanted:
        chunk = chunks.get(chunk_id)
        file = files.get((chunk.vector_store_id, chunk.file_id)) if chunk is not None else None
        if chunk is None or file is None:
            continue
        hits.append(
            SearchHit(
                vector_store_id=chunk.vector_store_id,
                file_id=chunk.file_id,
                filename=file.filename,
                score=round(score, 6),
                attributes=file.attributes,
                text=chunk.text,
                position=chunk.position,
                char_start=chunk.char_start,
                char_end=chunk.char_end,
                chunk_id=chunk.id,
            )
        )
        if len(hits) == limit:
            break
    return hits
