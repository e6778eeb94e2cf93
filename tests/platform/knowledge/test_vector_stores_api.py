"""``/v1/vector_stores`` through the official ``openai`` client: files attached at creation, one at a time and in
batches are ingested inline (parsed, chunked to the model's input limit, embedded and billed in chip-µs like
``/v1/embeddings``), with OpenAI's objects, errors and statuses; other tenants' stores are out of reach."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import numpy as np
import openai
import pytest
from openai.types import VectorStore
from openai.types.vector_stores import VectorStoreFile, VectorStoreFileBatch
from sqlalchemy import func, select, update

from switchyard.platform.admission import admission_for
from switchyard.platform.db import TenantScope
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.inference.runtime import build_pool
from switchyard.platform.knowledge.chunking import StaticChunkingStrategy, chunk_text
from switchyard.platform.knowledge.vector_stores.ingestion import UPSTREAM_PATIENCE, ingest_file
from switchyard.platform.knowledge.vector_stores.leases import files_to_recover
from switchyard.platform.models import ApiKey, KnowledgeChunk, UsageEvent, utc_now
from switchyard.platform.models import VectorStore as StoreRow
from switchyard.platform.models import VectorStoreFile as FileRow
from tests.platform.agents_api.factories import run_inline
from tests.platform.billing.factories import rated_usage
from tests.support.ports import free_port

WORDS = ["ferry", "pier", "harbour", "ticket", "tide", "lantern", "anchor", "gull", "rope", "deck"]


def _text(words: int, seed: int = 0) -> str:
    return " ".join(WORDS[(i * 7 + seed) % len(WORDS)] + str(i % 13) for i in range(words))


class _Nowhere:
    def send_task(self, name: str, args: Any) -> None:
        pass


def _sdk(client: Any, tenant: Any, role: str = "developer") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://switchyard.test/v1", api_key=tenant.keys[role], http_client=client, max_retries=0
    )


async def _upload(sdk: openai.AsyncOpenAI, name: str, data: bytes, media_type: str = "text/plain") -> str:
    return (await sdk.files.create(file=(name, data, media_type), purpose="assistants")).id


async def _settled(client: Any, sdk: openai.AsyncOpenAI, store_id: str) -> VectorStore:
    """The store once no file is in progress (ingestion runs inline)."""
    for _ in range(500):
        store = await sdk.vector_stores.retrieve(store_id)
        if store.file_counts.in_progress == 0:
            return store
        await asyncio.sleep(0.02)
    raise AssertionError(f"{store_id} stayed in progress")


async def _rows(client: Any, tenant: Any, table: Any, *conditions: Any) -> list[Any]:
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        return list((await session.execute(select(table).where(*conditions))).scalars())


async def test_files_attached_at_creation_are_ingested_chunked_to_the_model_and_billed(
    client: Any, make_tenant: Any
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    texts = {"long.txt": _text(1500), "notes.md": "# Pier 4\n\nThe ferry leaves at 07:15."}
    file_ids = {name: await _upload(sdk, name, text.encode()) for name, text in texts.items()}
    created = await sdk.vector_stores.create(name="harbour", file_ids=list(file_ids.values()), metadata={"team": "ops"})
    assert created.id.startswith("vs_")
    assert created.name == "harbour"
    assert created.metadata == {"team": "ops"}
    assert created.status == "in_progress"
    assert created.file_counts.total == 2

    store = await _settled(client, sdk, created.id)
    assert store.status == "completed"
    assert store.file_counts.model_dump() == {"in_progress": 0, "completed": 2, "failed": 0, "cancelled": 0, "total": 2}
    files = [f async for f in sdk.vector_stores.files.list(store.id)]
    assert {f.id for f in files} == set(file_ids.values())
    assert all(isinstance(f, VectorStoreFile) for f in files)
    # BGE-large encodes 512 tokens: auto is cut to 512-token chunks overlapping by 256
    sizes = {"type": "static", "static": {"max_chunk_size_tokens": 512, "chunk_overlap_tokens": 256}}
    assert all(f.status == "completed" and f.chunking_strategy.model_dump() == sizes for f in files)  # type: ignore[union-attr]

    chunks = await _rows(client, tenant, KnowledgeChunk, KnowledgeChunk.vector_store_id == store.id)
    expected = {
        file_ids[name]: list(chunk_text(text, StaticChunkingStrategy.model_validate(sizes)))
        for name, text in texts.items()
    }
    assert len(expected[file_ids["long.txt"]]) > 1
    assert sorted((c.file_id, c.position, c.text) for c in chunks) == sorted(
        (file_id, c.index, c.text) for file_id, pieces in expected.items() for c in pieces
    )
    assert all(len(c.embedding) == 4 * 1024 for c in chunks)
    assert all(abs(np.linalg.norm(np.frombuffer(c.embedding, dtype="<f4")) - 1) < 1e-3 for c in chunks)
    assert store.usage_bytes == sum(len(c.text.encode()) for c in chunks)

    events = await _rows(client, tenant, UsageEvent)
    assert events
    assert all(e.event_id.startswith("ingest:") and e.model == "BAAI/bge-large-en-v1.5" for e in events)
    [attaching_key] = await _rows(client, tenant, ApiKey, ApiKey.role == "developer")
    assert {e.api_key_id for e in events} == {attaching_key.id}  # billed to the key that attached the files
    assert all(e.chip_us > 0 and e.completion_tokens == 0 for e in events)
    assert sum(e.prompt_tokens for e in events) >= sum(c.tokens for c in chunks)
    usage = await client.get(
        f"/v1/usage?start_time={int(utc_now().timestamp()) - 3600}&group_by=model", headers=tenant.headers("viewer")
    )
    assert usage.status_code == 200, usage.text
    results = [r for bucket in usage.json()["data"] for r in bucket["results"]]
    assert sum(r["chip_us"] for r in results) == sum(e.chip_us for e in events)
    await rated_usage(client.app.state.database, TenantScope(tenant.id))  # rated as the beat rates it: invoiced
    (invoice,) = (await client.get("/v1/invoices", headers=tenant.headers("admin"))).json()["data"]
    lines = [line for line in invoice["lines"] if line["model"] == "BAAI/bge-large-en-v1.5"]
    assert sum(line["chip_us"] for line in lines) == sum(e.chip_us for e in events)

    content = await client.get(
        f"/v1/vector_stores/{store.id}/files/{file_ids['notes.md']}/content", headers=tenant.headers("viewer")
    )
    assert content.json()["data"] == [{"type": "text", "text": texts["notes.md"]}]


async def test_a_repeated_batch_after_a_crash_is_stored_and_billed_once(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    file_id = await _upload(sdk, "long.txt", _text(20_000).encode())
    store = await sdk.vector_stores.create(
        file_ids=[file_id],
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}},
    )
    await _settled(client, sdk, store.id)
    chunks_before = len(await _rows(client, tenant, KnowledgeChunk))
    events_before = {(e.event_id, e.chip_us) for e in await _rows(client, tenant, UsageEvent)}
    assert chunks_before > 32
    assert len(events_before) > 1
    # a worker died after its first batch: the row says so, and its lease passed
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        await session.execute(
            update(FileRow).values(
                status="in_progress", chunks_done=32, lease_owner="dead:1#0", lease_expires_at=utc_now() - timedelta(1)
            )
        )
    [row] = await _rows(client, tenant, FileRow)
    database = client.app.state.database
    assert (tenant.id, row.row_id) in await files_to_recover(database, grace_s=60)  # its lease passed
    env = RunEnvironment(  # a worker of this test's event loop
        database=database,
        pool=build_pool(client.app.state.settings),
        admission=client.app.state.gateway.admission,
        lease_s=30,
        worker_id="next",
    )
    assert await ingest_file(env, tenant_id=tenant.id, row_id=row.row_id) == "completed"
    assert await ingest_file(env, tenant_id=tenant.id, row_id=row.row_id) == "not_taken"  # redelivered: nothing
    assert (tenant.id, row.row_id) not in await files_to_recover(database, grace_s=0)
    assert len(await _rows(client, tenant, KnowledgeChunk)) == chunks_before
    assert {(e.event_id, e.chip_us) for e in await _rows(client, tenant, UsageEvent)} == events_before
    assert (await sdk.vector_stores.files.retrieve(file_id, vector_store_id=store.id)).status == "completed"


async def test_chunking_is_bounded_by_the_embedding_model_and_dimensions_by_its_range(
    client: Any, make_tenant: Any
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    too_long = {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}
    with pytest.raises(openai.BadRequestError) as refused:
        await sdk.vector_stores.create(chunking_strategy=too_long)  # type: ignore[arg-type]
    assert refused.value.body["param"] == "chunking_strategy"  # type: ignore[index]
    assert "512" in refused.value.body["message"]  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as refused:
        await sdk.vector_stores.create(extra_body={"dimensions": 256})
    assert refused.value.body["param"] == "dimensions"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        await sdk.vector_stores.create(extra_body={"embedding_model": "no-such/model"})

    qwen = await sdk.vector_stores.create(extra_body={"embedding_model": "Qwen/Qwen3-Embedding-8B", "dimensions": 256})
    file_id = await _upload(sdk, "a.txt", _text(900).encode())
    attached = await sdk.vector_stores.files.create(vector_store_id=qwen.id, file_id=file_id)
    assert attached.chunking_strategy.model_dump() == {  # type: ignore[union-attr]
        "type": "static",
        "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400},
    }
    await _settled(client, sdk, qwen.id)
    chunks = await _rows(client, tenant, KnowledgeChunk, KnowledgeChunk.vector_store_id == qwen.id)
    assert chunks
    assert all(len(c.embedding) == 4 * 256 for c in chunks)


async def test_attributes_are_validated_as_openai_validates_them(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    store = await sdk.vector_stores.create()
    file_id = await _upload(sdk, "a.txt", b"lantern")
    for bad in ({f"k{i}": i for i in range(17)}, {"nested": {"a": 1}}, {"long": "x" * 513}, {"k" * 65: 1}, {"l": [1]}):
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.vector_stores.files.create(vector_store_id=store.id, file_id=file_id, attributes=bad)  # type: ignore[arg-type]
        assert refused.value.body["code"] == "invalid_value"  # type: ignore[index]
    good = {"author": "Ada", "year": 1843, "draft": False, "score": 0.5}
    attached = await sdk.vector_stores.files.create(vector_store_id=store.id, file_id=file_id, attributes=good)
    assert attached.attributes == good
    updated = await sdk.vector_stores.files.update(file_id, vector_store_id=store.id, attributes={"author": "Bo"})
    assert updated.attributes == {"author": "Bo"}
    again = await sdk.vector_stores.files.create(vector_store_id=store.id, file_id=file_id)
    assert again.attributes == {"author": "Bo"}  # attaching it again answers it as it is


async def test_unreadable_files_fail_with_openai_last_errors(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    image = await _upload(sdk, "photo.png", b"\x89PNG\r\n\x1a\n....", "image/png")
    broken = await _upload(sdk, "data.json", b'{"a": [1, 2', "application/json")
    fine = await _upload(sdk, "ok.txt", b"anchor and rope")
    store = await sdk.vector_stores.create(file_ids=[image, broken, fine])
    store = await _settled(client, sdk, store.id)
    assert (store.file_counts.failed, store.file_counts.completed) == (2, 1)
    assert store.status == "completed"
    failed = {f.id: f for f in [f async for f in sdk.vector_stores.files.list(store.id, filter="failed")]}
    assert failed[image].last_error is not None
    assert failed[image].last_error.code == "unsupported_file"
    assert failed[broken].last_error is not None
    assert failed[broken].last_error.code == "invalid_file"
    assert await _rows(client, tenant, KnowledgeChunk, KnowledgeChunk.file_id.in_([image, broken])) == []  # type: ignore[attr-defined]


async def test_a_hard_budget_stops_ingestion_with_a_server_error_naming_it(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    budget = await client.post("/v1/budgets", json={"limit_minor": 0, "hard": True}, headers=tenant.headers("admin"))
    assert budget.status_code in (200, 201), budget.text
    store = await sdk.vector_stores.create(file_ids=[await _upload(sdk, "a.txt", b"gull on the deck")])
    store = await _settled(client, sdk, store.id)
    [failed] = [f async for f in sdk.vector_stores.files.list(store.id)]
    assert failed.status == "failed"
    assert failed.last_error is not None
    assert failed.last_error.code == "server_error"
    assert "budget" in failed.last_error.message.lower()
    assert await _rows(client, tenant, UsageEvent) == []


async def test_file_batches_attach_files_with_their_own_attributes_and_can_be_cancelled(
    client: Any, make_tenant: Any
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    store = await sdk.vector_stores.create()
    first, second = await _upload(sdk, "a.txt", b"tide one"), await _upload(sdk, "b.txt", b"tide two")
    with pytest.raises(openai.BadRequestError):
        await sdk.vector_stores.file_batches.create(store.id, file_ids=[first], files=[{"file_id": second}])
    batch = await sdk.vector_stores.file_batches.create(
        store.id, files=[{"file_id": first, "attributes": {"n": 1}}, {"file_id": second, "attributes": {"n": 2}}]
    )
    assert isinstance(batch, VectorStoreFileBatch)
    assert batch.id.startswith("vsfb_")
    await _settled(client, sdk, store.id)
    batch = await sdk.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id)
    assert batch.status == "completed"
    assert batch.file_counts.completed == 2
    listed = [f async for f in sdk.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)]
    assert sorted((f.id, f.attributes["n"]) for f in listed) == sorted([(first, 1), (second, 2)])  # type: ignore[index]
    page = await sdk.vector_stores.files.list(store.id, limit=1, order="asc")
    assert page.has_more
    assert page.data[0].id == first
    assert (await sdk.vector_stores.files.list(store.id, limit=1, order="asc", after=first)).data[0].id == second

    # a batch cancelled before its worker runs: its files are cancelled, none ingested
    third = await _upload(sdk, "c.txt", b"tide three")
    client.app.state.jobs = _Nowhere()  # the job is lost: nothing ingests it
    pending = await sdk.vector_stores.file_batches.create(store.id, file_ids=[third])
    cancelled = await sdk.vector_stores.file_batches.cancel(pending.id, vector_store_id=store.id)
    assert cancelled.status == "cancelled"
    assert cancelled.file_counts.cancelled == 1
    assert (await sdk.vector_stores.files.retrieve(third, vector_store_id=store.id)).status == "cancelled"

    deleted = await sdk.vector_stores.files.delete(first, vector_store_id=store.id)
    assert deleted.deleted
    assert deleted.id == first
    assert await _rows(client, tenant, KnowledgeChunk, KnowledgeChunk.file_id == first) == []
    store_now = await sdk.vector_stores.retrieve(store.id)
    assert store_now.usage_bytes == len(b"tide two")
    assert store_now.file_counts.total == 2
    assert (await sdk.files.retrieve(first)).id == first  # the file itself stays


async def test_another_tenants_stores_and_files_are_not_found(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    mine, other = await make_tenant(), await make_tenant()
    sdk, theirs = _sdk(client, mine), _sdk(client, other)
    file_id = await _upload(sdk, "a.txt", b"rope")
    store = await sdk.vector_stores.create(file_ids=[file_id])
    for call in (
        theirs.vector_stores.retrieve(store.id),
        theirs.vector_stores.delete(store.id),
        theirs.vector_stores.files.retrieve(file_id, vector_store_id=store.id),
        theirs.vector_stores.files.list(store.id),
    ):
        with pytest.raises(openai.NotFoundError):
            await call
    their_store = await theirs.vector_stores.create()
    with pytest.raises(openai.NotFoundError) as refused:  # my file, attached to their store
        await theirs.vector_stores.files.create(vector_store_id=their_store.id, file_id=file_id)
    assert refused.value.body["param"] == "file_id"  # type: ignore[index]
    assert [s.id async for s in theirs.vector_stores.list()] == [their_store.id]


async def test_stores_are_listed_modified_expire_and_are_deleted(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    store = await sdk.vector_stores.create(
        name="a", expires_after={"anchor": "last_active_at", "days": 2}, file_ids=[await _upload(sdk, "a.txt", b"x")]
    )
    assert store.expires_after is not None
    assert store.expires_after.days == 2
    assert store.expires_at == store.last_active_at + 2 * 86400  # type: ignore[operator]
    other = await sdk.vector_stores.create(name="b")
    assert [s.id async for s in sdk.vector_stores.list(order="asc")] == [store.id, other.id]

    renamed = await sdk.vector_stores.update(store.id, name="renamed", metadata={"k": "v"})
    assert (renamed.name, renamed.metadata, renamed.expires_after) == ("renamed", {"k": "v"}, store.expires_after)
    kept = await sdk.vector_stores.update(other.id, expires_after=None)
    assert kept.expires_at is None

    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:  # two days pass
        await session.execute(update(StoreRow).where(StoreRow.id == store.id).values(expires_at=utc_now()))
    assert (await sdk.vector_stores.retrieve(store.id)).status == "expired"

    await _settled(client, sdk, other.id)
    deleted = await sdk.vector_stores.delete(store.id)
    assert deleted.deleted
    assert deleted.id == store.id
    with pytest.raises(openai.NotFoundError):
        await sdk.vector_stores.retrieve(store.id)
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        left = (
            await session.execute(
                select(func.count()).select_from(KnowledgeChunk).where(KnowledgeChunk.vector_store_id == store.id)
            )
        ).scalar_one()
    assert left == 0
    assert [s.id async for s in sdk.vector_stores.list()] == [other.id]


def test_the_package_exports_its_jobs_and_what_other_domains_use() -> None:
    import switchyard.platform.knowledge.vector_stores as package

    assert sorted(package.__all__) == ["INGEST_TASK", "RECOVER_TASK", "ingest_file"]
    assert all(getattr(package, name) is not None for name in package.__all__)
    assert (package.INGEST_TASK, package.RECOVER_TASK) == ("vector_stores.ingest", "vector_stores.recover")


async def test_a_worker_sets_a_file_aside_when_a_rate_refuses_a_batch(client: Any, make_tenant: Any) -> None:
    client.app.state.jobs = _Nowhere()  # this test is the worker
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    strategy = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}
    store = await sdk.vector_stores.create(
        file_ids=[await _upload(sdk, "a.txt", _text(2000).encode())],
        chunking_strategy=strategy,  # type: ignore[arg-type]
    )
    database = client.app.state.database
    settings = client.app.state.settings.model_copy(update={"tenant_tokens_per_minute": 3500})  # one batch, not two
    env = RunEnvironment(
        database=database,
        pool=build_pool(settings),
        admission=admission_for(settings, database),
        lease_s=30,
        worker_id="worker",
        worker=True,
    )
    [row] = await _rows(client, tenant, FileRow)
    assert await ingest_file(env, tenant_id=tenant.id, row_id=row.row_id) == "deferred"
    [row] = await _rows(client, tenant, FileRow)
    assert (row.status, row.chunks_done, row.lease_owner) == ("in_progress", 32, None)
    assert row.lease_expires_at is not None
    assert row.lease_expires_at > utc_now()
    assert await ingest_file(env, tenant_id=tenant.id, row_id=row.row_id) == "not_taken"
    assert (tenant.id, row.row_id) not in await files_to_recover(database, grace_s=0)
    assert [e.event_id for e in await _rows(client, tenant, UsageEvent)] == [f"ingest:{row.row_id}:0"]
    assert (await sdk.vector_stores.retrieve(store.id)).status == "in_progress"


async def test_a_failing_upstream_is_waited_out_for_a_while_then_fails_the_file(
    client: Any, make_tenant: Any, tmp_path: Any
) -> None:
    client.app.state.jobs = _Nowhere()  # this test is the worker
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    store = await sdk.vector_stores.create(file_ids=[await _upload(sdk, "a.txt", b"tide at noon")])
    [row] = await _rows(client, tenant, FileRow)
    fleet = tmp_path / "fleet.json"  # the store's model, now served by an upstream nobody answers at
    deployment = {
        "name": (await _rows(client, tenant, StoreRow))[0].embedding_model,
        "backend": "openai-compatible",
        "task": "embeddings",
        "base_url": f"http://127.0.0.1:{free_port()}/v1",
        "upstream_model": "e5",
        "chips": 1,
        "context_window": 512,
    }
    fleet.write_text(json.dumps({"deployments": [deployment]}))
    settings = client.app.state.settings.model_copy(update={"fleet_file": str(fleet)})
    database = client.app.state.database
    env = RunEnvironment(
        database=database,
        pool=build_pool(settings),
        admission=admission_for(settings, database),
        lease_s=30,
        worker_id="worker",
        worker=True,
    )
    try:
        assert await ingest_file(env, tenant_id=tenant.id, row_id=row.row_id) == "deferred"
        assert (await sdk.vector_stores.files.retrieve(row.file_id, vector_store_id=store.id)).status == "in_progress"

        async with database.unit_of_work(TenantScope(tenant.id)) as session:
            await session.execute(
                update(FileRow)
                .where(FileRow.row_id == row.row_id)  # type: ignore[arg-type]
                .values(created_at=utc_now() - UPSTREAM_PATIENCE - timedelta(seconds=1), lease_expires_at=None)
            )
        assert await ingest_file(env, tenant_id=tenant.id, row_id=row.row_id) == "failed"
        failed = await sdk.vector_stores.files.retrieve(row.file_id, vector_store_id=store.id)
        assert failed.status == "failed"
        assert failed.last_error is not None
        assert (failed.last_error.code, failed.last_error.message.startswith("the embedding model kept failing")) == (
            "server_error",
            True,
        )
        assert await _rows(client, tenant, UsageEvent) == []
    finally:
        await env.pool.aclose()


async def test_the_clients_polling_helpers_wait_for_ingestion(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    store = await sdk.vector_stores.create(name="polled")
    uploaded = await sdk.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("a.md", b"# Tide\n\nHigh at noon.", "text/markdown"), poll_interval_ms=20
    )
    assert uploaded.status == "completed"
    other = await _upload(sdk, "b.txt", b"low at six")
    batch = await sdk.vector_stores.file_batches.create_and_poll(store.id, file_ids=[other], poll_interval_ms=20)
    assert batch.status == "completed"
    assert batch.file_counts.completed == 1
