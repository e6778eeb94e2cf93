"""Factories for billing tests (also used by the isolation matrix): receipts, rated usage, invoices."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from switchyard.platform.billing.ledger import UsageEventCreate, rate_events, record_usage
from switchyard.platform.db import UNSCOPED, Database, TenantScope

_events = itertools.count()


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


async def record_fleet_side(
    session: Any, scope: TenantScope, events: list[UsageEventCreate], replicas: int = 1
) -> None:
    """What the replicas record for ``events``: their receipts, and busy time per instance type in the month of
    the first event (split over ``replicas`` replicas: each its own rows)."""
    from switchyard.platform.billing.fleet import minute_of, record_fleet_busy, record_fleet_receipts

    await record_fleet_receipts(
        session,
        [
            (
                scope.tenant_id,
                e.event_id,
                f"{e.instance_type}/{n % replicas}",
                e.instance_type,
                e.chip_us,
                e.occurred_at,
            )
            for n, e in enumerate(events)
        ],
    )
    busy: dict[tuple[str, str], int] = {}
    for n, event in enumerate(events):
        key = (event.instance_type, f"{event.instance_type}/{n % replicas}")
        busy[key] = busy.get(key, 0) + event.chip_us
    minute = minute_of(events[0].occurred_at)
    for (instance_type, replica), chip_us in busy.items():
        await record_fleet_busy(
            session, replica=replica, instance_type=instance_type, chip_us=chip_us, period_start=minute
        )


async def rated_usage(database: Database, scope: TenantScope, *events: UsageEventCreate) -> None:
    """Record ``events`` for the tenant and rate everything pending (which also opens draft invoices)."""
    async with database.unit_of_work(scope) as session:
        for event in events:
            await record_usage(session, scope=scope, event=event)
    while True:
        async with database.unit_of_work(UNSCOPED) as session:
            if not (await rate_events(session)).rated:
                return


async def make_invoice(client: Any, tenant: Any) -> str:
    """An invoice id of ``tenant`` (an isolation-matrix factory): usage of the current month, rated."""
    from sqlalchemy import select

    from switchyard.platform.models import Invoice

    database: Database = client.app.state.database
    scope = TenantScope(tenant.id)
    await rated_usage(database, scope, receipt(occurred_at=datetime.now(UTC)))
    async with database.unit_of_work(scope) as session:
        return str((await session.execute(select(Invoice.id))).scalars().first())


async def make_budget(client: Any, tenant: Any) -> str:
    """A budget id of ``tenant`` (an isolation-matrix factory), made through the API."""
    response = await client.post("/v1/budgets", json={"limit_minor": 10_000}, headers=tenant.headers())
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def make_rate_card(client: Any, tenant: Any) -> str:
    """A rate card id that priced nothing (an isolation-matrix factory; cards are the operators', no tenant's)."""
    from switchyard.platform.billing.rates import create_rate_card

    database: Database = client.app.state.database
    async with database.unit_of_work(UNSCOPED) as session:
        card = await create_rate_card(
            session, instance_type="trn2.48xlarge", price_per_chip_hour=Decimal(1), model=f"matrix-{next(_events)}"
        )
        return card.id


BILLING_FACTORIES = {"budget_id": make_budget, "invoice_id": make_invoice, "rate_card_id": make_rate_card}
"""Path parameters of the billing routes → factories, merged into the isolation matrix's ``FACTORIES``."""
