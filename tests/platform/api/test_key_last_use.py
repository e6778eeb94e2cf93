"""Keys' last use: a request moves ``last_used_at``, at most one write a minute per key, each tenant its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event, select, update

from switchyard.platform.auth.last_use import KeyUseRecorder
from switchyard.platform.auth.principal import Principal
from switchyard.platform.auth.roles import Role
from switchyard.platform.db import UNSCOPED, TenantScope
from switchyard.platform.models import ApiKey, OperatorKey
from tests.platform.conftest import bearer


@contextmanager
def key_writes(app: Any) -> Iterator[list[str]]:
    """The UPDATE statements on key tables that the app's engine sends while inside the block."""
    sent: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        lowered = statement.lower()
        if lowered.startswith("update") and ("api_keys" in lowered or "operator_keys" in lowered):
            sent.append(statement)

    engine = app.state.database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", seen)


async def _key(client: Any, headers: dict[str, str], name: str) -> dict[str, Any]:
    made = await client.post("/v1/api-keys", json={"role": "viewer", "name": name}, headers=headers)
    assert made.status_code == 201, made.text
    return dict(made.json())


async def _listed(client: Any, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    await client.app.state.key_uses.drain()
    return {k["id"]: k for k in (await client.get("/v1/api-keys", headers=headers)).json()["data"]}


async def test_a_request_moves_last_used_and_a_second_within_the_minute_writes_nothing(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    created = await _key(client, tenant.headers(), "ci")
    assert created["last_used_at"] is None
    assert (await _listed(client, tenant.headers()))[created["id"]]["last_used_at"] is None  # never used
    before = datetime.now(UTC) - timedelta(seconds=1)
    await client.app.state.key_uses.drain()  # the owner key's own first use, from the calls above
    with key_writes(client.app) as writes:
        assert (await client.get("/v1/agents", headers=bearer(created["value"]))).status_code == 200
        await client.app.state.key_uses.drain()
    assert len(writes) == 1
    first = (await _listed(client, tenant.headers()))[created["id"]]["last_used_at"]
    assert first is not None
    assert datetime.fromisoformat(first) >= before
    with key_writes(client.app) as writes:
        for _ in range(3):
            assert (await client.get("/v1/agents", headers=bearer(created["value"]))).status_code == 200
        await client.app.state.key_uses.drain()
    assert writes == []  # within the minute: not one statement
    assert (await _listed(client, tenant.headers()))[created["id"]]["last_used_at"] == first


async def test_last_use_is_the_key_s_own_tenant_s(client: Any, make_tenant: Any) -> None:
    mine, theirs = await make_tenant(), await make_tenant()
    used = await _key(client, mine.headers(), "used")
    idle = await _key(client, theirs.headers(), "idle")
    assert (await client.get("/v1/agents", headers=bearer(used["value"]))).status_code == 200
    assert (await _listed(client, mine.headers()))[used["id"]]["last_used_at"] is not None
    their_keys = await _listed(client, theirs.headers())
    assert used["id"] not in their_keys  # another tenant neither sees the key nor its use
    assert their_keys[idle["id"]]["last_used_at"] is None


async def test_the_update_moves_only_a_last_use_older_than_a_minute(client: Any, make_tenant: Any) -> None:
    """Another API process wrote it a moment ago: this process's write changes nothing; a minute later it does."""
    tenant = await make_tenant()
    created = await _key(client, tenant.headers(), "shared")
    ticks = [1000.0]
    recorder = KeyUseRecorder(client.app.state.database, clock=lambda: ticks[0])
    principal = Principal(key_id=created["id"], scope=TenantScope(tenant.id), role=Role.VIEWER)
    recent = datetime.now(UTC) - timedelta(seconds=20)
    await _set_last_use(client, created["id"], recent)
    recorder.note(principal)
    await recorder.drain()
    assert await _last_use(client, created["id"]) == recent  # written elsewhere 20 s ago: left alone
    long_ago = datetime.now(UTC) - timedelta(minutes=5)
    await _set_last_use(client, created["id"], long_ago)
    recorder.note(principal)  # this process wrote it less than a minute ago by its own clock: no statement
    await recorder.drain()
    assert await _last_use(client, created["id"]) == long_ago
    ticks[0] += 61
    recorder.note(principal)
    await recorder.drain()
    assert await _last_use(client, created["id"]) > long_ago + timedelta(minutes=4)


async def test_an_operator_key_s_use_is_recorded(client: Any, operator_key: str) -> None:
    assert (await client.get("/v1/admin/tenants", headers=bearer(operator_key))).status_code == 200
    await client.app.state.key_uses.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        short_id = operator_key.split("_")[1]
        row = (await session.execute(select(OperatorKey).where(OperatorKey.short_id == short_id))).scalar_one()
    assert row.last_used_at is not None


async def test_a_failed_write_never_fails_the_request(client: Any, make_tenant: Any) -> None:
    """The key row vanishes from under the write's feet (the database refuses it): the request still answers."""
    tenant = await make_tenant()
    created = await _key(client, tenant.headers(), "doomed")
    engine = client.app.state.database.engine.sync_engine

    def refuse(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lower().startswith("update api_keys"):
            raise RuntimeError("the database refused the write")

    event.listen(engine, "before_cursor_execute", refuse)
    try:
        assert (await client.get("/v1/agents", headers=bearer(created["value"]))).status_code == 200
        await client.app.state.key_uses.drain()
    finally:
        event.remove(engine, "before_cursor_execute", refuse)
    assert (await _listed(client, tenant.headers()))[created["id"]]["last_used_at"] is None
    assert (await client.get("/v1/agents", headers=bearer(created["value"]))).status_code == 200  # tried again
    assert (await _listed(client, tenant.headers()))[created["id"]]["last_used_at"] is not None


async def _set_last_use(client: Any, key_id: str, when: datetime) -> None:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        await session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=when))


async def _last_use(client: Any, key_id: str) -> datetime:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        row = await session.get(ApiKey, key_id)
    assert row is not None
    assert row.last_used_at is not None
    return row.last_used_at
