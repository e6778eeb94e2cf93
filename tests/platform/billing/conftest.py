"""Billing fixtures: a ``Database`` on each backend and tenants made through the tenant service."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from switchyard.platform.billing.ledger import UsageEventCreate
from switchyard.platform.db import UNSCOPED, Database, TenantScope

_events = itertools.count()


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = Database(database_url)
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


def receipt(
    *,
    chip_us: int = 1_000_000,
    occurred_at: datetime | None = None,
    event_id: str | None = None,
    model: str = "llama-3.1-8b",
    instance_type: str = "trn2.48xlarge",
    **extra: Any,
) -> UsageEventCreate:
    """A compute receipt with sensible defaults."""
    return UsageEventCreate(
        event_id=event_id or f"req_{next(_events)}",
        model=model,
        instance_type=instance_type,
        chip_us=chip_us,
        prompt_tokens=extra.pop("prompt_tokens", 10),
        completion_tokens=extra.pop("completion_tokens", 5),
        occurred_at=occurred_at or datetime(2026, 11, 15, 12, 30, tzinfo=UTC),
        **extra,
    )
