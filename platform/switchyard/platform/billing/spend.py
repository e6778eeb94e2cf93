"""What a budget's scope has spent in a period, read from the usage ledger.

A budget's ``spent_micros`` is a counter that settlements add to, so a budget set in the middle of a month would
start at zero although its period began on the 1st. ``spent_in_period`` gives it the spend of its scope (the
tenant, one API key, one agent, or one workflow's runs whichever agents acted in them) from the period's start,
priced as ``costs`` prices usage. Spend in another currency than the budget's, or with no applicable card, is not
counted (reservations refuse a budget in another currency).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.costs import Pricer
from switchyard.platform.models import UsageEvent, utc_now

__all__ = ["spent_in_period"]


def _scope_condition(scope_kind: str, scope_ref: str) -> list[ColumnElement[bool]]:
    if scope_kind == "api_key":
        return [col(UsageEvent.api_key_id) == scope_ref]
    if scope_kind == "agent":
        return [col(UsageEvent.agent_id) == scope_ref]
    if scope_kind == "workflow":  # every step of its runs, whichever agent acted
        return [col(UsageEvent.workflow_id) == scope_ref]
    return []


async def spent_in_period(
    session: AsyncSession,
    *,
    tenant_id: str,
    scope_kind: str,
    scope_ref: str,
    currency: str,
    period_start: datetime,
    now: datetime | None = None,
) -> int:
    """Micro-units of ``currency`` the scope's usage of the month starting ``period_start`` costs."""
    now = now or utc_now()
    statement = (
        select(
            col(UsageEvent.instance_type),
            col(UsageEvent.model),
            col(UsageEvent.price_per_chip_hour),
            col(UsageEvent.currency),
            func.sum(col(UsageEvent.chip_us)),
        )
        .where(
            col(UsageEvent.tenant_id) == tenant_id,
            col(UsageEvent.period_start) == period_start,
            *_scope_condition(scope_kind, scope_ref),
        )
        .group_by(
            col(UsageEvent.instance_type),
            col(UsageEvent.model),
            col(UsageEvent.price_per_chip_hour),
            col(UsageEvent.currency),
        )
    )
    pricer = Pricer(session, tenant_id=tenant_id, now=now)
    spent = 0
    for instance_type, model, rated_at, rated_in, chip_us in (await session.execute(statement)).all():
        price = await pricer.price(instance_type=instance_type, model=model, rated_at=rated_at, rated_in=rated_in)
        if price is not None and price.currency == currency:
            spent += price.of(int(chip_us))
    return spent
