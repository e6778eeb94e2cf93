"""Billing fixtures: a ``Database`` on each backend and tenants made through the tenant service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchyard.platform.db import UNSCOPED, Database, TenantScope


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    # Thousands of rows are built between statements of one transaction here: on a CI machine running four test
    # processes on two cores that pause once passed the platform's 10 s idle-in-transaction limit.
    db = Database(database_url, idle_in_transaction_timeout_ms=60_000)
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
def new_tenant(database: Database) -> Any:
    """``await new_tenant()`` → a ``TenantScope`` of a fresh tenant."""
    from switchyard.platform.auth.principal import Actor
    from switchyard.platform.tenants.service import create_tenant

    async def make(name: str = "billing") -> TenantScope:
        async with database.unit_of_work(UNSCOPED) as session:
            created = await create_tenant(session, actor=Actor("tests", None), name=name, owner_email=None)
        return TenantScope(created.id)

    return make
