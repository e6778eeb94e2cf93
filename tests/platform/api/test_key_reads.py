"""Reading keys and budgets on the request path: requests that miss a key (or a tenant's budgets) together read it
from the database once, and a key in use is read again before its cache entry expires, so a busy process does not
stall all its requests together each time a hot entry expires."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from sqlalchemy import event

from switchyard.platform.admission.budget_holds import BudgetHolds
from switchyard.platform.app import create_app
from switchyard.platform.db import Database, TenantScope
from tests.platform.conftest import bearer
from tests.support.served import served


@contextmanager
def selects_of(engine: Any, table: str) -> Iterator[list[str]]:
    """The SELECT statements reading `table` that `engine` sends inside the block."""
    sent: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        lowered = statement.lower()
        if lowered.lstrip().startswith("select") and f"from {table}" in lowered:
            sent.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", seen)


async def test_requests_that_miss_a_key_together_read_it_once(settings: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    key = tenant.keys["viewer"]
    app = create_app(settings)  # served by uvicorn, so the requests below run at the same time
    with served(app, lifespan="on") as url:
        async with httpx.AsyncClient(base_url=url, headers=bearer(key)) as http:
            with selects_of(app.state.database.engine.sync_engine, "api_keys") as reads:
                answers = await asyncio.gather(*(http.get("/v1/agents") for _ in range(8)))
                assert [a.status_code for a in answers] == [200] * 8
                assert len(reads) == 1  # one read for the eight: before, each request read the key
                app.state.key_cache.forget(key.split("_")[1])  # as when its entry expired
                answers = await asyncio.gather(*(http.get("/v1/agents") for _ in range(8)))
                assert [a.status_code for a in answers] == [200] * 8
                assert len(reads) == 2


async def test_a_wrong_secret_for_a_cached_key_is_refused(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    key = tenant.keys["viewer"]
    assert (await client.get("/v1/agents", headers=bearer(key))).status_code == 200
    forged = key[: key.rindex("_") + 1] + "x" * len(key.rsplit("_", 1)[1])
    refused = await client.get("/v1/agents", headers=bearer(forged))
    assert refused.status_code == 401
    assert "invalid API key" in refused.text


async def test_calls_that_ask_together_whether_a_tenant_has_budgets_read_it_once(database_url: str) -> None:
    database = Database(database_url)
    try:
        holds = BudgetHolds(database)
        with selects_of(database.engine.sync_engine, "budgets") as reads:
            answers = await asyncio.gather(*(holds._has_budgets(TenantScope("ten_a")) for _ in range(8)))
            assert answers == [False] * 8
            assert await holds._has_budgets(TenantScope("ten_a")) is False  # cached
        assert len(reads) == 1
    finally:
        await database.dispose()
