"""Ingestion into a vector store survives a worker killed with SIGKILL mid-file, on PostgreSQL + Redis.

Files are attached through the API (a real app, sending ``vector_stores.ingest`` to Redis); a real Celery worker
process ingests them and is killed while a file is part-way through (some of its batches stored, not all). The test
plays ``vector_stores.recover`` (the beat is not running) and starts another worker, which takes the files over once
their leases pass and resumes after the chunks stored. Every file must complete with every chunk stored once, and
billed once: the usage events are exactly one per batch of ``EMBED_BATCH_CHUNKS`` chunks, ids
``ingest:{row}:{first position}``, their prompt tokens the chunks' own.

Run as a script, this file is the worker (``switchyard worker --pool solo``).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

if __name__ == "__main__":
    from switchyard.platform.cli import main

    main(["worker", "--pool", "solo"])
    sys.exit(0)

# below the script part: run as a worker, this file is not in a package and imports nothing of the tests'
from tests.support.script_process import ScriptProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

WORDS = ["ferry", "pier", "harbour", "ticket", "tide", "lantern", "anchor", "gull", "rope", "deck"]
STRATEGY = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 20}}


def _text(words: int, seed: int) -> str:
    return " ".join(WORDS[(i * 7 + seed) % len(WORDS)] + str((i + seed) % 17) for i in range(words))


async def _files(database: Any, store_id: str) -> list[Any]:
    from sqlalchemy import select

    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import VectorStoreFile

    async with database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(select(VectorStoreFile).where(VectorStoreFile.vector_store_id == store_id))
        return list(rows.scalars())


@pytest.mark.timeout(300)
async def test_a_worker_killed_mid_file_leaves_the_batch_completed_and_each_chunk_billed_once(
    postgres_database: str, redis_database: str, tmp_path: Path
) -> None:
    from litestar.testing import AsyncTestClient
    from sqlalchemy import select

    from switchyard.accelerator.pool import input_tokens
    from switchyard.platform.app import create_app
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.knowledge.chunking import StaticChunkingStrategy, chunk_text
    from switchyard.platform.knowledge.vector_stores.ingestion import (
        EMBED_BATCH_CHUNKS,
        INGEST_TASK,
        usage_event_id,
    )
    from switchyard.platform.knowledge.vector_stores.leases import files_to_recover
    from switchyard.platform.models import KnowledgeChunk, UsageEvent
    from switchyard.platform.settings import Settings
    from switchyard.platform.worker import create_celery

    env = {
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_DATABASE_URL": postgres_database,
        "SWITCHYARD_BROKER_URL": redis_database,
        "SWITCHYARD_TIME_SCALE": "0",
        "SWITCHYARD_VECTOR_STORE_INGEST_LEASE_SECONDS": "2",
        "SWITCHYARD_LOG_LEVEL": "warning",
        "SWITCHYARD_SIMULATE_IN_PROCESS": "1",
    }
    settings = Settings(
        data_dir=tmp_path / "data", database_url=postgres_database, broker_url=redis_database, time_scale=0
    )
    celery = create_celery(settings)
    worker = ScriptProcess(__file__, env, tmp_path)
    texts = {f"doc{i}.txt": _text(40_000, i) for i in range(3)}
    async with AsyncTestClient(app=create_app(settings), base_url="http://switchyard.test") as client:
        database = client.app.state.database
        from switchyard.platform.bootstrap import CLI_ACTOR
        from switchyard.platform.tenants.service import create_operator_key

        async with database.unit_of_work(UNSCOPED) as session:
            operator = await create_operator_key(session, actor=CLI_ACTOR, name="ingest")
        tenant = await client.post(
            "/v1/admin/tenants", json={"name": "ingest"}, headers={"Authorization": f"Bearer {operator}"}
        )
        headers = {"Authorization": f"Bearer {tenant.json()['owner_key']['value']}"}
        file_ids = {}
        for name, text in texts.items():
            uploaded = await client.post(
                "/v1/files",
                files={"file": (name, text.encode(), "text/plain")},
                data={"purpose": "assistants"},
                headers=headers,
            )
            assert uploaded.status_code == 200, uploaded.text
            file_ids[name] = uploaded.json()["id"]
        store = await client.post("/v1/vector_stores", json={"name": "durable"}, headers=headers)
        store_id = store.json()["id"]
        batch = await client.post(
            f"/v1/vector_stores/{store_id}/file_batches",
            json={"file_ids": list(file_ids.values()), "chunking_strategy": STRATEGY},
            headers=headers,
        )
        assert batch.status_code == 200, batch.text
        batch_id = batch.json()["id"]

        worker.start()
        deadline = time.monotonic() + 240
        killed_mid_file = 0
        done_at_start = 0
        last_sweep = time.monotonic()
        try:
            while True:
                answer = await client.get(f"/v1/vector_stores/{store_id}/file_batches/{batch_id}", headers=headers)
                if answer.json()["status"] != "in_progress":
                    break
                assert time.monotonic() < deadline, f"batch stuck: {answer.json()} after {killed_mid_file} kills"
                if killed_mid_file < 2:  # kill the worker twice while it has a file part-way through
                    rows = await _files(database, store_id)
                    done = sum(row.chunks_done for row in rows)
                    if done > done_at_start and any(0 < row.chunks_done < (row.chunks_total or 0) for row in rows):
                        worker.kill()
                        killed_mid_file += 1
                        worker.start()
                        done_at_start = done  # the next kill waits for the new worker to store a batch
                if time.monotonic() - last_sweep > 1:  # the beat's vector_stores.recover
                    last_sweep = time.monotonic()
                    for tenant_id, row_id in await files_to_recover(database, grace_s=3):
                        celery.send_task(INGEST_TASK, args=[tenant_id, row_id])
                await asyncio.sleep(0.01)
        finally:
            worker.stop()

        assert answer.json()["status"] == "completed", answer.json()
        assert answer.json()["file_counts"]["completed"] == len(texts)
        rows = {row.file_id: row for row in await _files(database, store_id)}
        async with database.unit_of_work(UNSCOPED) as session:
            chunks = list(
                (
                    await session.execute(select(KnowledgeChunk).where(KnowledgeChunk.vector_store_id == store_id))
                ).scalars()
            )
            tenant_id = tenant.json()["id"]
            events = list(
                (await session.execute(select(UsageEvent).where(UsageEvent.tenant_id == tenant_id))).scalars()
            )
        sizes = StaticChunkingStrategy.model_validate(STRATEGY)
        expected_events = {}
        for name, text in texts.items():
            row = rows[file_ids[name]]
            pieces = list(chunk_text(text, sizes))
            stored = sorted((c.position, c.text) for c in chunks if c.file_id == row.file_id)
            assert stored == [(p.index, p.text) for p in pieces]  # every chunk, once
            assert (row.status, row.chunks_done, row.chunks_total) == ("completed", len(pieces), len(pieces))
            for start in range(0, len(pieces), EMBED_BATCH_CHUNKS):
                batch_texts = [p.text for p in pieces[start : start + EMBED_BATCH_CHUNKS]]
                expected_events[usage_event_id(row.row_id, start)] = sum(input_tokens(batch_texts))
        assert {e.event_id: e.prompt_tokens for e in events} == expected_events  # each batch billed once
        assert all(e.chip_us > 0 for e in events)
        assert killed_mid_file == 2, "the files were ingested before a worker could be killed part-way"
        assert worker.started == 3
