"""Row-level security on PostgreSQL: the second layer of tenant isolation holds for raw SQL too."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from switchyard.platform.db import UNSCOPED, Database, TenantScope, new_id
from switchyard.platform.models import Member, Tenant, TenantOwned

pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("database_url", ["postgres"], indirect=True)]


@pytest.fixture
async def database(database_url: str) -> Any:
    db = Database(database_url)
    yield db
    await db.dispose()


async def _two_tenants(db: Database) -> tuple[str, str]:
    a, b = new_id("ten"), new_id("ten")
    async with db.unit_of_work(UNSCOPED) as session:
        session.add_all([Tenant(id=a, name="a"), Tenant(id=b, name="b")])
        await session.flush()
        for tenant_id in (a, b):
            session.add(Member(id=new_id("mem"), tenant_id=tenant_id, email=f"{tenant_id}@x.io", role="viewer"))
    return a, b


def _owned_tables() -> set[str]:
    classes, todo = set(), [TenantOwned]
    while todo:
        for sub in todo.pop().__subclasses__():
            classes.add(sub)
            todo.append(sub)
    return {c.__tablename__ for c in classes if getattr(c, "__table__", None) is not None}  # type: ignore[attr-defined]


async def test_every_tenant_owned_table_has_a_policy(database: Database) -> None:
    owned = _owned_tables()
    assert {"members", "usage_events", "runs"} <= owned
    async with database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(
            text(
                "SELECT c.relname, c.relrowsecurity, count(p.policyname) FROM pg_class c "
                "LEFT JOIN pg_policies p ON p.tablename = c.relname AND p.schemaname = 'public' "
                "WHERE c.relname = ANY(:names) AND c.relkind = 'r' GROUP BY c.relname, c.relrowsecurity"
            ),
            {"names": sorted(owned)},
        )
        found = {name: (enabled, policies) for name, enabled, policies in rows}
    assert found == {name: (True, 1) for name in owned}


async def test_raw_sql_in_a_tenant_scope_sees_and_changes_only_that_tenant(database: Database) -> None:
    a, b = await _two_tenants(database)
    async with database.unit_of_work(TenantScope(a)) as session:
        seen = (await session.execute(text("SELECT tenant_id FROM members"))).scalars().all()
        assert seen == [a]
        changed = await session.execute(text("UPDATE members SET role = 'owner' WHERE tenant_id = :b"), {"b": b})
        assert changed.rowcount == 0
    async with database.unit_of_work(UNSCOPED) as session:
        roles = dict((await session.execute(text("SELECT tenant_id, role FROM members"))).all())
    assert roles == {a: "viewer", b: "viewer"}


async def test_raw_sql_cannot_write_a_row_into_another_tenant(database: Database) -> None:
    a, b = await _two_tenants(database)
    with pytest.raises(DBAPIError, match="row-level security"):
        async with database.unit_of_work(TenantScope(a)) as session:
            await session.execute(
                text(
                    "INSERT INTO members (id, tenant_id, email, role, created_at) "
                    "VALUES (:id, :b, 'x@x.io', 'owner', now())"
                ),
                {"id": new_id("mem"), "b": b},
            )
    async with database.unit_of_work(UNSCOPED) as session:
        assert (
            await session.execute(text("SELECT count(*) FROM members WHERE tenant_id = :b"), {"b": b})
        ).scalar_one() == 1


async def test_the_tenant_setting_ends_with_its_transaction(database: Database) -> None:
    a, _ = await _two_tenants(database)
    async with database.unit_of_work(TenantScope(a)) as session:
        assert (await session.execute(text("SELECT current_user"))).scalar_one() == "switchyard_tenant"
    async with database.unit_of_work(UNSCOPED) as session:
        assert (await session.execute(text("SELECT current_user"))).scalar_one() != "switchyard_tenant"
        assert (await session.execute(text("SELECT count(*) FROM members"))).scalar_one() == 2
