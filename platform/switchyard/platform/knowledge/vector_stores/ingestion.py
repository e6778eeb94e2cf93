"""Ingesting one attached file: parse, chunk, embed the chunks in batches on the pool, store them; resumable.

``ingest_file`` is the ``vector_stores.ingest`` job's work, the same in a worker and inline (tests). It takes the
file's *lease* (``lease_owner``, ``lease_expires_at`` on its ``vector_store_files`` row; extended every third of
``lease_s`` while it works), so one process ingests a file at a time, and a process that dies leaves the lease to
pass: ``vector_stores.recover`` then sends the file again and the next process resumes after ``chunks_done``.

Each batch of ``EMBED_BATCH_CHUNKS`` chunks is one embedding call, admitted as ``/v1/embeddings`` is (the tenant's
token rate, a request slot, a hold on its budgets, and those of the key that attached the file, when a key did)
and run at ``batch`` priority. Its chunks, its usage
event (id ``ingest:{row id}:{first chunk position}``), the budget hold's settlement and the new ``chunks_done``
commit in one transaction, on condition that this process still holds the lease and the file is still in progress:
a batch is stored and billed together or not at all, a batch repeated after a crash has the same usage event id
(usage events are unique per tenant and event id) and its chunks the same positions (unique per store, file and
position), so no chunk is billed or stored twice.

Parsing and chunking are CPU work: they run in a thread, within ``parse_timeout_s`` (a file that takes longer
fails ``invalid_file``; the thread finishes on its own, its result unused). Outcomes, as the file's status:

- ``completed``: every chunk stored (a file with no text has none);
- ``failed`` with ``last_error``: ``unsupported_file`` or ``invalid_file`` from parsing, or ``server_error``: the
  model is no longer served, or a budget refused a batch (the message names the budget; OpenAI has no code for
  it, and waiting would hold the file in progress until someone raised the budget), or the embedding model's
  upstream still failing ``UPSTREAM_PATIENCE`` after the file was attached. A failed file's chunks go.
- a batch whose upstream call fails puts the file aside for 5 s, so a short outage only delays it;
- in a worker, a batch that a rate or a full set of request slots refuses *puts the file aside* (no holder, not
  to be taken before the refusal's time): the worker slot is free meanwhile and ``vector_stores.recover`` sends
  it again then. Inline (tests, single process) it waits in place.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

import numpy as np
from sqlalchemy import select, update
from sqlmodel import col

from switchyard.accelerator.pool import (
    AcceleratorPool,
    Backend,
    ComputeReceipt,
    EmbeddingRequest,
    Embeddings,
    Priority,
    UpstreamError,
    input_tokens,
)
from switchyard.platform.admission import (
    Admission,
    Holds,
    LimitsOutage,
    ModelCall,
    TryLater,
    admit_waiting,
    held_chip_us,
    model_backend,
)
from switchyard.platform.admission.waiting import retry_in_s
from switchyard.platform.billing import budgets
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.billing.ledger import UsageEventCreate, record_usage_bulk
from switchyard.platform.billing.sql import insert_ignore
from switchyard.platform.db import Database, TenantScope, new_id
from switchyard.platform.http.errors import ApiError, NotFound
from switchyard.platform.knowledge.chunking import StaticChunkingStrategy, chunk_text
from switchyard.platform.knowledge.parsing import DocumentError, parse_document
from switchyard.platform.knowledge.vector_stores import leases, repository
from switchyard.platform.models import (
    FileContent,
    KnowledgeChunk,
    StoredFile,
    VectorStore,
    VectorStoreFile,
    utc_now,
)

__all__ = [
    "EMBED_BATCH_CHUNKS",
    "INGEST_TASK",
    "PARSE_TIMEOUT_S",
    "RECOVER_TASK",
    "UPSTREAM_PATIENCE",
    "IngestionEnvironment",
    "ingest_file",
    "usage_event_id",
]

log = logging.getLogger(__name__)

INGEST_TASK = "vector_stores.ingest"
RECOVER_TASK = "vector_stores.recover"
EMBED_BATCH_CHUNKS = 32
"""Chunks per embedding call: BGE-large's 512-token chunks make 16k-token calls."""
PARSE_TIMEOUT_S = 120.0
UPSTREAM_PATIENCE = timedelta(hours=1)
"""How long after a file was attached a failing upstream is waited out; then the file fails (it would otherwise
be sent again every few seconds for ever)."""


class IngestionEnvironment(Protocol):
    """What ingesting needs (a worker's and the inline dispatcher's run environment both have it)."""

    database: Database
    pool: AcceleratorPool
    admission: Admission
    lease_s: float
    worker_id: str
    worker: bool
    usage_committed: Callable[[], None] | None


def usage_event_id(row_id: str, position: int) -> str:
    """The usage event of the batch of file row ``row_id`` that starts at chunk ``position``."""
    return f"ingest:{row_id}:{position}"


@dataclass(frozen=True, slots=True)
class _Piece:
    position: int
    text: str
    tokens: int
    start: int
    end: int


class _Failed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _LeaseLost(Exception):
    """The file was cancelled, detached or taken over: this process stores nothing more."""


class _SetAside(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"set aside for {seconds:.1f} s")
        self.seconds = seconds


def _pieces(data: bytes, filename: str, content_type: str | None, strategy: dict[str, Any]) -> list[_Piece]:
    """The file's chunks (CPU work: run in a thread)."""
    # NUL has no place in a PostgreSQL text column: the replacement character keeps every offset where it was
    text = parse_document(data, filename=filename, content_type=content_type).text.replace("\x00", "\ufffd")
    sizes = StaticChunkingStrategy.model_validate(strategy)
    return [_Piece(c.index, c.text, c.tokens, c.start_char, c.end_char) for c in chunk_text(text, sizes)]


async def ingest_file(
    env: IngestionEnvironment, *, tenant_id: str, row_id: str, parse_timeout_s: float = PARSE_TIMEOUT_S
) -> str:
    """Ingest the attached file ``row_id`` from where it stopped; what happened: ``completed``, ``failed``,
    ``deferred`` (set aside for admission), ``not_taken`` (finished, leased by another process, set aside until
    later, detached) or ``lost`` (cancelled or detached meanwhile)."""
    scope = TenantScope(tenant_id)
    owner = f"{env.worker_id}#{secrets.token_hex(4)}"
    if not await leases.take(env.database, scope, row_id, owner, env.lease_s):
        return "not_taken"
    beating = asyncio.ensure_future(leases.heartbeat(env.database, scope, row_id, owner, env.lease_s))
    try:
        outcome = await _ingest(env, scope, row_id, owner, parse_timeout_s)
    except _Failed as failed:
        await leases.fail(env.database, scope, row_id, owner, failed.code, failed.message)
        return "failed"
    except _LeaseLost:
        return "lost"
    except _SetAside as aside:
        await leases.release(env.database, scope, row_id, owner, until_s=aside.seconds)
        return "deferred"
    except BaseException:  # interrupted (a stopping worker, the database gone): another process resumes it
        await asyncio.shield(leases.release_quietly(env.database, scope, row_id, owner))
        raise
    finally:
        beating.cancel()
    return outcome


async def _ingest(env: IngestionEnvironment, scope: TenantScope, row_id: str, owner: str, timeout_s: float) -> str:
    async with env.database.unit_of_work(scope) as session:
        row = await leases.file_row(session, scope, row_id)
        if row is None:  # detached, or its store deleted, since the lease was taken
            raise _LeaseLost()
        try:
            store = await repository.store_row(session, scope, row.vector_store_id)
        except NotFound:
            raise _LeaseLost() from None
        file = (
            await session.execute(
                select(StoredFile).where(
                    col(StoredFile.tenant_id) == scope.tenant_id, col(StoredFile.id) == row.file_id
                )
            )
        ).scalar_one_or_none()
        content = (
            await session.execute(
                select(col(FileContent.data)).where(
                    col(FileContent.tenant_id) == scope.tenant_id, col(FileContent.file_id) == row.file_id
                )
            )
        ).scalar_one_or_none()
        for detached in (row, store):
            session.expunge(detached)
    if file is None or content is None or file.deleted_at is not None:
        raise _Failed("invalid_file", f"file {row.file_id} was deleted before it was ingested")
    try:
        pieces = await asyncio.wait_for(
            asyncio.to_thread(_pieces, content, file.filename, file.content_type, row.chunking_strategy), timeout_s
        )
    except DocumentError as exc:
        raise _Failed(exc.code, str(exc)) from None
    except TimeoutError:
        raise _Failed("invalid_file", f"parsing and chunking the file took longer than {timeout_s:.0f} s") from None
    try:
        backend = model_backend(env.pool, store.embedding_model, scope.tenant_id, task="embeddings")
    except ApiError as exc:
        raise _Failed("server_error", f"the store's embedding model cannot be used: {exc.message}") from None
    for start in range(row.chunks_done, len(pieces), EMBED_BATCH_CHUNKS):
        batch = pieces[start : start + EMBED_BATCH_CHUNKS]
        await _embed_and_store(env, scope, row, store, backend, owner, batch, len(pieces))
    async with env.database.unit_of_work(scope) as session:
        finished = await session.execute(
            leases.held(scope, row_id, owner)
            .values(
                status="completed",
                chunks_total=len(pieces),
                lease_owner=None,
                lease_expires_at=None,
                updated_at=utc_now(),
            )
            .execution_options(synchronize_session=False)
        )
        if finished.rowcount != 1:  # type: ignore[attr-defined]
            raise _LeaseLost()
    return "completed"


async def _admit(env: IngestionEnvironment, call: ModelCall) -> Holds:
    try:
        if env.worker:
            return await env.admission.admit(call)
        return await admit_waiting(env.admission, call)
    except (TryLater, LimitsOutage) as refused:  # (a worker only: admit_waiting waits these out)
        raise _SetAside(retry_in_s(refused, waited_s=0.0)) from None
    except BudgetExceeded as exc:
        raise _Failed("server_error", f"ingestion stopped: {exc.message}") from None
    except ApiError as exc:
        raise _Failed("server_error", f"ingestion was refused: {exc.message}") from None


async def _embed_and_store(
    env: IngestionEnvironment,
    scope: TenantScope,
    row: VectorStoreFile,
    store: VectorStore,
    backend: Backend,
    owner: str,
    batch: list[_Piece],
    total: int,
) -> None:
    """Embed one batch and commit its chunks, its usage and the file's progress together (module docstring)."""
    event_id = usage_event_id(row.row_id, batch[0].position)
    texts = tuple(piece.text for piece in batch)
    call = ModelCall(
        scope=scope,
        api_key_id=row.api_key_id,
        agent_id=None,
        backend=backend,
        prompt_tokens=sum(input_tokens(texts)),
        output_tokens=0,
        holder=event_id,
    )
    holds = await _admit(env, call)
    billed = False
    try:
        request = EmbeddingRequest(
            request_id=event_id,
            tenant=scope.tenant_id,
            model=backend.name,
            inputs=texts,
            dimensions=store.dimensions,
            priority=Priority.BATCH,
            compute_ceiling_chip_us=held_chip_us(call) if holds.reservation_id is not None else None,
        )
        vectors: Embeddings | None = None
        receipt: ComputeReceipt | None = None
        try:
            async for event in env.pool.embed(request):
                if isinstance(event, Embeddings):
                    vectors = event
                elif isinstance(event, ComputeReceipt):
                    receipt = event
        except UpstreamError as exc:  # tried again later, from this batch, for a while
            log.warning("embedding batch %s failed upstream: %s", event_id, exc)
            if utc_now() - row.created_at > UPSTREAM_PATIENCE:
                raise _Failed("server_error", f"the embedding model kept failing: {exc}") from None
            raise _SetAside(5.0) from None
        if vectors is None or receipt is None:  # the fleet stopped the call (shutting down): resumed elsewhere
            raise _SetAside(1.0)
        await _commit_batch(env.database, scope, row, owner, batch, vectors, receipt, holds, total, env.lease_s)
        billed = True
    finally:
        await env.admission.finish(holds, billed=billed)
    if env.usage_committed is not None:
        env.usage_committed()


async def _commit_batch(
    database: Database,
    scope: TenantScope,
    row: VectorStoreFile,
    owner: str,
    batch: list[_Piece],
    vectors: Embeddings,
    receipt: ComputeReceipt,
    holds: Holds,
    total: int,
    lease_s: float,
) -> None:
    now = utc_now()
    added_bytes = sum(len(piece.text.encode()) for piece in batch)
    async with database.unit_of_work(scope) as session:
        progressed = await session.execute(
            leases.held(scope, row.row_id, owner)
            .values(
                chunks_done=batch[-1].position + 1,
                chunks_total=total,
                usage_bytes=col(VectorStoreFile.usage_bytes) + added_bytes,
                lease_expires_at=now + timedelta(seconds=lease_s),
                updated_at=now,
            )
            .execution_options(synchronize_session=False)
        )
        if progressed.rowcount != 1:  # type: ignore[attr-defined]
            raise _LeaseLost()
        chunks = [
            {
                "id": new_id("chk"),
                "tenant_id": scope.tenant_id,
                "vector_store_id": row.vector_store_id,
                "file_id": row.file_id,
                "position": piece.position,
                "text": piece.text,
                "tokens": piece.tokens,
                "char_start": piece.start,
                "char_end": piece.end,
                "embedding": np.asarray(vector, dtype="<f4").tobytes(),
                "created_at": now,
            }
            for piece, vector in zip(batch, vectors.vectors, strict=True)
        ]
        await session.execute(
            insert_ignore(session, KnowledgeChunk, ["vector_store_id", "file_id", "position"]), chunks
        )
        event = UsageEventCreate(
            event_id=usage_event_id(row.row_id, batch[0].position),
            api_key_id=row.api_key_id,
            model=receipt.model,
            instance_type=receipt.instance_type,
            chip_us=receipt.chip_us,
            prompt_tokens=receipt.prompt_tokens,
            completion_tokens=0,
            occurred_at=now,
        )
        await record_usage_bulk(session, scope=scope, events=[event])
        if holds.reservation_id is not None:
            await budgets.settle(
                session, scope=scope, reservation_id=holds.reservation_id, actual_chip_us=receipt.chip_us
            )
        await session.execute(
            update(VectorStore)
            .where(col(VectorStore.tenant_id) == scope.tenant_id, col(VectorStore.id) == row.vector_store_id)
            .values(usage_bytes=col(VectorStore.usage_bytes) + added_bytes, revision=col(VectorStore.revision) + 1)
            .execution_options(synchronize_session=False)
        )
