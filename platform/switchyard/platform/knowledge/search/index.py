"""The full-text half of search: each layout's index (migration 0019), queried for a ranked list of chunk ids.

SQLite ranks with FTS5's ``bm25`` (the text column only; the store id is indexed too, to narrow a query to its
stores inside the index); PostgreSQL with ``ts_rank_cd`` over the generated ``text_search`` column, through the
function ``knowledge_chunks_matching`` (row-level security would keep the GIN index from serving ``@@``, which is
not leakproof; the function filters by the transaction's own tenant setting instead). Both leave out the words
found in ``COMMON_TERM_CHUNKS`` chunks of the stores or more when rarer ones remain: ranking reads every chunk a word
matches, and such a word says little (``ts_rank_cd`` has no inverse document frequency to say so itself).
A query's words (letters and digits, lower-cased, the first ``MAX_TERMS`` distinct ones, without English function
words such as "the" or "is" unless there is nothing else: they match nearly every chunk) are OR-ed, each quoted
(FTS5) or passed as data (PostgreSQL), so nothing a user types is read as query syntax. Every statement names the
tenant, explicitly or through the transaction's setting (the session's tenant criteria apply to ORM statements
only).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.db import TenantScope
from switchyard.platform.db.unmodelled import FTS_TABLE

__all__ = ["MAX_TERMS", "full_text_ranking", "query_terms"]

MAX_TERMS = 32
COMMON_TERM_CHUNKS = 2000
"""A word found in this many of the searched stores' chunks is left out of a query with rarer ones."""
MAX_FILE_IDS_IN_QUERY = 5000
"""Past this many files left by a filter, the statement does not list them (the caller drops the others)."""
_WORD = re.compile(r"[^\W_]+")
_FUNCTION_WORDS = """
    a about above after again all also am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    him his how i if in into is it its itself just me more most my no nor not now of off on once only or other our
    out over own same she should so some such than that the their them then there these they this those through to
    too under until up very was we were what when where which while who whom why will with would you your"""
STOP_WORDS = frozenset(_FUNCTION_WORDS.split())


def query_terms(queries: Sequence[str]) -> list[str]:
    """The distinct words of ``queries`` (lower-cased letters and digits), the first ``MAX_TERMS`` of them, without
    ``STOP_WORDS`` unless they are all there is."""
    words = list(dict.fromkeys(word[:64] for query in queries for word in _WORD.findall(query.lower())))
    content = [word for word in words if word not in STOP_WORDS]
    return (content or words)[:MAX_TERMS]


def _quoted(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _sqlite_statement(with_files: bool) -> Any:
    files = "AND c.file_id IN :file_ids" if with_files else ""
    statement = text(
        f"""SELECT c.id, c.vector_store_id, c.file_id FROM {FTS_TABLE} AS f
        JOIN knowledge_chunks AS c ON c.rowid = f.rowid
        JOIN vector_store_files AS v ON v.vector_store_id = c.vector_store_id AND v.file_id = c.file_id
        WHERE {FTS_TABLE} MATCH :match AND c.tenant_id = :tenant AND v.tenant_id = :tenant
          AND c.vector_store_id IN :stores AND v.status = 'completed' {files}
        ORDER BY bm25({FTS_TABLE}, 1.0, 0.0), c.id LIMIT :limit"""
    ).bindparams(bindparam("stores", expanding=True))
    return statement.bindparams(bindparam("file_ids", expanding=True)) if with_files else statement


_POSTGRES_MATCHING = text(
    "SELECT chunk_id, store_id, chunk_file_id FROM knowledge_chunks_matching("
    "CAST(:stores AS varchar[]), CAST(:terms AS text[]), CAST(:file_ids AS varchar[]), :limit, :common)"
)


async def _sqlite_rarer_terms(session: AsyncSession, terms: Sequence[str], stores: str) -> Sequence[str]:
    """``terms`` without those in ``COMMON_TERM_CHUNKS`` chunks of the stores or more, unless no other is left (as
    ``knowledge_chunks_matching`` does on PostgreSQL): ``bm25`` weighs them little, and ranking costs every match."""
    if len(terms) < 2:
        return terms
    counts = " UNION ALL ".join(
        f"SELECT {index}, (SELECT count(*) FROM (SELECT 1 FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :m{index} "
        "LIMIT :cap))"
        for index in range(len(terms))
    )
    params: dict[str, Any] = {"cap": COMMON_TERM_CHUNKS}
    params |= {f"m{i}": f"text : {_quoted(term)} AND vector_store_id : ({stores})" for i, term in enumerate(terms)}
    found = {row[0]: row[1] for row in await session.execute(text(counts), params)}
    rarer = [term for index, term in enumerate(terms) if found.get(index, 0) < COMMON_TERM_CHUNKS]
    return rarer or terms


async def full_text_ranking(
    session: AsyncSession,
    scope: TenantScope,
    *,
    store_ids: Sequence[str],
    terms: Sequence[str],
    file_ids: Collection[str] | None,
    limit: int,
) -> list[tuple[str, str, str]]:
    """``(chunk id, store id, file id)`` of the chunks of ``store_ids`` (of completed files; of ``file_ids`` only,
    when given) that hold any of ``terms``, best first, at most ``limit``."""
    if not terms or not store_ids:
        return []
    with_files = file_ids is not None and len(file_ids) <= MAX_FILE_IDS_IN_QUERY
    if session.get_bind().dialect.name == "postgresql":  # the tenant: the transaction's (see migration 0019)
        files = list(file_ids) if with_files and file_ids is not None else None
        postgres = {"stores": list(store_ids), "terms": list(terms), "file_ids": files, "limit": limit}
        rows = await session.execute(_POSTGRES_MATCHING, postgres | {"common": COMMON_TERM_CHUNKS})
        return [(row[0], row[1], row[2]) for row in rows]
    stores = " OR ".join(_quoted(store_id) for store_id in store_ids)
    terms = await _sqlite_rarer_terms(session, terms, stores)
    match = f"text : ({' OR '.join(_quoted(term) for term in terms)}) AND vector_store_id : ({stores})"
    params: dict[str, Any] = {"match": match, "tenant": scope.tenant_id, "stores": list(store_ids), "limit": limit}
    if with_files:
        assert file_ids is not None
        params["file_ids"] = list(file_ids)
    rows = await session.execute(_sqlite_statement(with_files), params)
    return [(row[0], row[1], row[2]) for row in rows]
