"""Tenant scoping in the data layer: no tenant context, no query; a scope sees only its own rows."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select, update

from switchyard.platform.db import UNSCOPED, Database, MissingTenantScope, TenantScope, new_id, scope_session
from switchyard.platform.models import Member, Tenant


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
            for n in range(2):
                session.add(Member(id=new_id("mem"), tenant_id=tenant_id, email=f"{n}@x.io", role="viewer"))
    return a, b


async def test_query_without_scope_is_refused(database: Database) -> None:
    await _two_tenants(database)
    async with database.session() as session:
        with pytest.raises(MissingTenantScope):
            await session.execute(select(Member))
        with pytest.raises(MissingTenantScope):
            await session.execute(update(Member).values(role="owner"))
    async with database.session() as session:
        scope_session(session, UNSCOPED)
        assert (await session.execute(select(func.count()).select_from(Member))).scalar_one() == 4


async def test_scoped_session_sees_only_its_tenant(database: Database) -> None:
    a, b = await _two_tenants(database)
    async with database.unit_of_work(TenantScope(a)) as session:
        rows = (await session.execute(select(Member))).scalars().all()
        assert {row.tenant_id for row in rows} == {a}
        # Even an explicit filter on the other tenant finds nothing: the scope is ANDed in.
        other = (await session.execute(select(Member).where(Member.tenant_id == b))).scalars().all()
        assert other == []
        await session.execute(update(Member).values(role="admin"))
    async with database.unit_of_work(TenantScope(b)) as session:
        roles = {row.role for row in (await session.execute(select(Member))).scalars()}
        assert roles == {"viewer"}


async def test_write_into_another_tenant_is_refused_and_nothing_changes(database: Database) -> None:
    a, b = await _two_tenants(database)
    with pytest.raises(MissingTenantScope):
        async with database.unit_of_work(TenantScope(a)) as session:
            session.add(Member(id=new_id("mem"), tenant_id=b, email="intruder@x.io", role="owner"))
    async with database.unit_of_work(TenantScope(b)) as session:
        emails = {row.email for row in (await session.execute(select(Member))).scalars()}
        assert "intruder@x.io" not in emails
