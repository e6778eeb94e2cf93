"""Search over vector stores: full-text, vector and fused rankings, filters, bounds, tenancy, billing, and the
endpoint through the official client. Stores, files and chunks are written directly (as ingestion writes them,
each chunk embedded as the pool embeds it); the index is kept in step by the database (migration 0019)."""

from __future__ import annotations

import hashlib
import itertools
from datetime import timedelta
from typing import Any

import numpy as np
import openai
import pytest
from sqlalchemy import select

from switchyard.accelerator.pool import embedding_vector
from switchyard.platform.db import UNSCOPED, TenantScope
from switchyard.platform.http.errors import InvalidRequest, NotFound
from switchyard.platform.knowledge.search import SearchDeps, search_vector_stores
from switchyard.platform.knowledge.search.index import full_text_ranking, query_terms
from switchyard.platform.knowledge.search.vectors import StoreMatrixCache, rank_by_cosine
from switchyard.platform.models import KnowledgeChunk, StoredFile, UsageEvent, VectorStore, VectorStoreFile, utc_now

QWEN = "Qwen/Qwen3-Embedding-8B"
DIMENSIONS = 256
_ids = itertools.count()

FILES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "trains.md": (
        [
            "Freight trains are sorted in a classification yard by humping cars over a small hill.",
            "A switchyard signal tells the driver which track the train will take.",
        ],
        {"topic": "rail", "year": 2020, "public": True},
    ),
    "kitchen.md": (
        ["Knead the dough for ten minutes, then let it rest until doubled in size.", "Bake the bread at 220 C."],
        {"topic": "food", "year": 2023, "public": False},
    ),
    "garden.md": (
        ["Tomatoes need full sun and regular watering; the purple marmoset orchid needs shade.", "Prune in spring."],
        {"topic": "plants", "year": 2024},
    ),
}
UNIQUE = "purple marmoset orchid"


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}{hashlib.sha1(prefix.encode()).hexdigest()[:6]}"


async def _make_store(client: Any, tenant_id: str, files: dict[str, tuple[list[str], dict[str, Any]]] = FILES) -> str:
    scope = TenantScope(tenant_id)
    store_id = _id("vs")
    async with client.app.state.database.unit_of_work(scope) as session:
        session.add(VectorStore(id=store_id, tenant_id=tenant_id, embedding_model=QWEN, dimensions=DIMENSIONS))
        await session.flush()
        for filename, (chunks, attributes) in files.items():
            file_id = _id("file")
            session.add(
                StoredFile(
                    id=file_id, tenant_id=tenant_id, filename=filename, purpose="assistants", bytes=100, sha256="0" * 64
                )
            )
            await session.flush()
            session.add(
                VectorStoreFile(
                    row_id=_id("vsf"),
                    tenant_id=tenant_id,
                    vector_store_id=store_id,
                    file_id=file_id,
                    status="completed",
                    attributes=attributes,
                )
            )
            start = 0
            for position, text in enumerate(chunks):
                vector = np.asarray(embedding_vector(QWEN, text, DIMENSIONS), dtype="<f4").tobytes()
                session.add(
                    KnowledgeChunk(
                        id=_id("chunk"),
                        tenant_id=tenant_id,
                        vector_store_id=store_id,
                        file_id=file_id,
                        position=position,
                        text=text,
                        tokens=len(text.split()),
                        char_start=start,
                        char_end=start + len(text),
                        embedding=vector,
                    )
                )
                start += len(text) + 1
    return store_id


def _deps(client: Any) -> SearchDeps:
    return SearchDeps.of_gateway(client.app.state.gateway)


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


async def _search(client: Any, tenant: Any, store_id: str, query: str, **options: Any) -> list[Any]:
    return await search_vector_stores(
        _deps(client), TenantScope(tenant.id), [store_id], query, api_key_id=None, **options
    )


async def test_the_chunk_with_a_unique_phrase_ranks_first_in_full_text_vector_and_hybrid(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    store_id = await _make_store(client, tenant.id)
    scope = TenantScope(tenant.id)
    query = f"which plant is the {UNIQUE}?"
    async with client.app.state.database.unit_of_work(scope) as session:
        words = await full_text_ranking(
            session, scope, store_ids=[store_id], terms=query_terms([query]), file_ids=None, limit=10
        )
        store = (await session.execute(select(VectorStore).where(VectorStore.id == store_id))).scalar_one()
        matrix = await StoreMatrixCache().matrix(session, scope, store)
        texts = {row[0]: row[1] for row in await session.execute(select(KnowledgeChunk.id, KnowledgeChunk.text))}
    vector = np.asarray(embedding_vector(QWEN, query, DIMENSIONS), dtype=np.float32)
    similar = await rank_by_cosine(matrix, vector, set(matrix.file_ids), 10)
    hits = await _search(client, tenant, store_id, query)

    assert UNIQUE in texts[words[0][0]]
    assert UNIQUE in texts[similar[0][0]]
    assert len(similar) == 6
    assert similar[0][1] > similar[1][1]
    assert UNIQUE in hits[0].text
    assert hits[0].filename == "garden.md"
    assert hits[0].score == 1.0
    assert hits[0].content == [{"type": "text", "text": hits[0].text}]
    assert (hits[0].position, hits[0].char_start, hits[0].char_end) == (0, 0, len(hits[0].text))
    assert hits[0].attributes == {"topic": "plants", "year": 2024}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize(
    ("condition", "filenames"),
    [
        ({"type": "eq", "key": "topic", "value": "rail"}, {"trains.md"}),
        ({"type": "ne", "key": "topic", "value": "rail"}, {"kitchen.md", "garden.md"}),
        ({"type": "gt", "key": "year", "value": 2020}, {"kitchen.md", "garden.md"}),
        ({"type": "gte", "key": "year", "value": 2023}, {"kitchen.md", "garden.md"}),
        ({"type": "lt", "key": "year", "value": 2023}, {"trains.md"}),
        ({"type": "lte", "key": "year", "value": 2023.0}, {"trains.md", "kitchen.md"}),
        ({"type": "in", "key": "topic", "value": ["food", "plants"]}, {"kitchen.md", "garden.md"}),
        ({"type": "nin", "key": "topic", "value": ["food", "plants"]}, {"trains.md"}),
        ({"type": "eq", "key": "public", "value": True}, {"trains.md"}),
        ({"type": "ne", "key": "public", "value": True}, {"kitchen.md", "garden.md"}),  # missing key: not equal
        ({"type": "eq", "key": "public", "value": False}, {"kitchen.md"}),  # missing key: equal to nothing
        ({"type": "gt", "key": "missing", "value": 0}, set()),
        ({"type": "eq", "key": "year", "value": "2020"}, set()),  # a string is not a number
        (
            {
                "type": "or",
                "filters": [
                    {
                        "type": "and",
                        "filters": [
                            {"type": "eq", "key": "topic", "value": "rail"},
                            {"type": "lt", "key": "year", "value": 2021},
                        ],
                    },
                    {"type": "eq", "key": "topic", "value": "plants"},
                ],
            },
            {"trains.md", "garden.md"},
        ),
        (
            {
                "type": "and",
                "filters": [
                    {"type": "eq", "key": "topic", "value": "rail"},
                    {"type": "eq", "key": "year", "value": 1999},
                ],
            },
            set(),
        ),
    ],
)
async def test_filters_keep_only_the_files_whose_attributes_pass(
    client: Any, make_tenant: Any, condition: dict[str, Any], filenames: set[str]
) -> None:
    tenant = await make_tenant()
    store_id = await _make_store(client, tenant.id)
    # words of every file, so that without the filter every file would be found
    hits = await _search(client, tenant, store_id, "train bread tomatoes prune", filters=condition, max_num_results=50)
    assert {hit.filename for hit in hits} == filenames


@pytest.mark.parametrize(
    "condition",
    [
        {"type": "like", "key": "a", "value": 1},
        {"type": "eq", "key": "a"},
        {"type": "and", "filters": []},
        {"type": "in", "key": "a", "value": "x"},
        {"type": "eq", "key": "a", "value": {"b": 1}},
        {
            "type": "and",
            "filters": [
                {
                    "type": "and",
                    "filters": [
                        {
                            "type": "and",
                            "filters": [{"type": "and", "filters": [{"type": "eq", "key": "a", "value": 1}]}],
                        }
                    ],
                }
            ],
        },
        {"type": "or", "filters": [{"type": "eq", "key": "a", "value": i} for i in range(65)]},
    ],
)
async def test_malformed_deep_or_huge_filters_are_refused_naming_filters(
    client: Any, make_tenant: Any, condition: dict[str, Any]
) -> None:
    tenant = await make_tenant()
    store_id = await _make_store(client, tenant.id)
    with pytest.raises(InvalidRequest) as refused:
        await _search(client, tenant, store_id, "train", filters=condition)
    assert (refused.value.param or "").startswith("filters")


async def test_max_num_results_and_score_threshold_bound_the_hits(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    store_id = await _make_store(client, tenant.id)
    everything = await _search(client, tenant, store_id, "the train bread", max_num_results=50)
    two = await _search(client, tenant, store_id, "the train bread", max_num_results=2)
    high = await _search(client, tenant, store_id, "the train bread", score_threshold=0.9, max_num_results=50)

    assert len(everything) == 6  # every chunk is similar to the query a little: the vector list holds them all
    assert [h.chunk_id for h in two] == [h.chunk_id for h in everything[:2]]
    assert high
    assert all(h.score >= 0.9 for h in high)
    assert len(high) < len(everything)
    for bad in ({"max_num_results": 0}, {"max_num_results": 51}, {"score_threshold": 1.5}):
        with pytest.raises(InvalidRequest):
            await _search(client, tenant, store_id, "train", **bad)


async def test_another_tenants_store_is_not_found_and_its_chunks_never_found(client: Any, make_tenant: Any) -> None:
    owner, other = await make_tenant(), await make_tenant()
    theirs = await _make_store(client, owner.id)
    mine = await _make_store(client, other.id, {"mine.md": (["Nothing about plants here at all."], {})})

    with pytest.raises(NotFound):
        await _search(client, other, theirs, UNIQUE)
    scope = TenantScope(other.id)
    async with client.app.state.database.unit_of_work(scope) as session:  # the raw full-text SQL, given their store
        found = await full_text_ranking(session, scope, store_ids=[theirs], terms=["marmoset"], file_ids=None, limit=10)
    assert found == []
    hits = await _search(client, other, mine, UNIQUE, max_num_results=50)
    assert [hit.filename for hit in hits] == ["mine.md"]
    missing = await client.post(
        f"/v1/vector_stores/{theirs}/search", json={"query": UNIQUE}, headers=other.headers("developer")
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "purple* OR NEAR(a b) AND NOT :", "text : orchid", "{text} - ^x", "'; DROP TABLE x; --", "_ ?"],
)
async def test_query_syntax_characters_are_only_text(client: Any, make_tenant: Any, query: str) -> None:
    tenant = await make_tenant()
    store_id = await _make_store(client, tenant.id)
    hits = await _search(client, tenant, store_id, f"{query} marmoset")
    assert UNIQUE in hits[0].text


async def test_the_official_client_searches_and_the_query_embedding_is_one_usage_event(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    store_id = await _make_store(client, tenant.id)
    sdk = _sdk(client, tenant.keys["developer"])

    page = await sdk.vector_stores.search(
        store_id,
        query=f"where does the {UNIQUE} grow",
        max_num_results=3,
        filters={"type": "gte", "key": "year", "value": 2020},
        ranking_options={"ranker": "auto", "score_threshold": 0.0},
        rewrite_query=True,
    )
    results = page.data
    assert len(results) == 3
    assert results[0].filename == "garden.md"
    assert UNIQUE in results[0].content[0].text
    assert results[0].content[0].type == "text"
    assert 0 < results[-1].score <= results[0].score <= 1
    assert results[0].attributes == {"topic": "plants", "year": 2024}

    raw = await client.post(
        f"/v1/vector_stores/{store_id}/search", json={"query": ["bread", "train"]}, headers=tenant.headers()
    )
    assert raw.status_code == 200, raw.text
    body = raw.json()
    assert body["object"] == "vector_store.search_results.page"
    assert body["search_query"] == ["bread", "train"]
    assert body["has_more"] is False
    assert body["next_page"] is None

    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        events = list((await session.execute(select(UsageEvent).where(UsageEvent.tenant_id == tenant.id))).scalars())
    assert len(events) == 2  # one embedding call per search (two queries: one call of two inputs)
    assert all(e.model == QWEN and e.chip_us > 0 and e.completion_tokens == 0 for e in events)
    keys = {e.api_key_id for e in events}  # each billed to the key that searched: the developer's, then the owner's
    assert len(keys) == 2
    assert None not in keys


async def test_files_still_ingesting_are_not_searched_and_a_new_revision_is_read_again(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    store_id = await _make_store(client, tenant.id)
    fresh = await _make_store(client, tenant.id, {"new.md": (["A quokka photobombs the switchyard."], {})})
    assert await _search(client, tenant, store_id, "quokka photobombs", max_num_results=50)
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        moved = (
            await session.execute(select(KnowledgeChunk).where(KnowledgeChunk.vector_store_id == fresh))
        ).scalar_one()
        moved_file = (
            await session.execute(select(VectorStoreFile).where(VectorStoreFile.vector_store_id == fresh))
        ).scalar_one()
        ingesting = VectorStoreFile(
            row_id=_id("vsf"),
            tenant_id=tenant.id,
            vector_store_id=store_id,
            file_id=moved.file_id,
            status="in_progress",
        )
        session.add(ingesting)
        session.add(
            KnowledgeChunk(
                id=_id("chunk"),
                tenant_id=tenant.id,
                vector_store_id=store_id,
                file_id=moved.file_id,
                position=0,
                text=moved.text,
                tokens=5,
                char_start=0,
                char_end=len(moved.text),
                embedding=moved.embedding,
            )
        )
        store = (await session.execute(select(VectorStore).where(VectorStore.id == store_id))).scalar_one()
        store.revision += 1  # as ingestion does whenever a store's chunks change
        assert moved_file.status == "completed"

    hits = await _search(client, tenant, store_id, "quokka photobombs", max_num_results=50)
    assert "quokka" not in " ".join(h.text for h in hits)  # its file is still in progress

    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        row = (
            await session.execute(select(VectorStoreFile).where(VectorStoreFile.row_id == ingesting.row_id))
        ).scalar_one()
        row.status = "completed"
        store = (await session.execute(select(VectorStore).where(VectorStore.id == store_id))).scalar_one()
        store.revision += 1
    hits = await _search(client, tenant, store_id, "quokka photobombs", max_num_results=50)
    assert "quokka" in hits[0].text
    assert hits[0].filename == "new.md"
    assert hits[0].score == 1.0


async def test_a_search_is_activity_that_moves_an_idle_expiry_on(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    store_id = await _make_store(client, tenant.id)
    idle_since = utc_now() - timedelta(days=2)
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        store = await session.get(VectorStore, store_id)
        assert store is not None
        store.expires_after = {"anchor": "last_active_at", "days": 7}
        store.last_active_at, store.expires_at = idle_since, idle_since + timedelta(days=7)

    before = utc_now()
    await _search(client, tenant, store_id, UNIQUE)
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        store = await session.get(VectorStore, store_id)
        assert store is not None
        assert store.last_active_at is not None
    assert store.last_active_at >= before
    assert store.expires_at == store.last_active_at + timedelta(days=7)


def test_the_package_exports_what_it_names() -> None:
    import switchyard.platform.knowledge.search as search

    assert sorted(search.__all__) == sorted(set(search.__all__))
    assert all(hasattr(search, name) for name in search.__all__)
    assert {"search_vector_stores", "SearchDeps", "SearchHit", "QueryEmbedder"} <= set(search.__all__)
