"""What a budget's scope has spent in a period, read from the usage ledger.

A budget's ``spent_micros`` is a counter that settlements add to, so a budget set in the middle of a month would
start at zero although its period began on the 1st. ``spent_in_period`` gives it the spend of its scope (the
tenant, one API key, one agent, or one workflow's runs whichever agents acted in them) from the period's start:
rated events at the price they were rated at, events not rated yet at the card that applies now (the price rating
will most likely give them). Spend in another currency than the budget's, or with no applicable card, is not counted
(reservations refuse a budget in another currency).

Each (price, instance type, model) group is rounded up once to the micro-unit, so the figure can differ from the
sum of the per-request settlements by less than one micro-unit per request.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.money import cost_micros_ceil
from switchyard.platform.billing.rates import cards_for, choose_card, tenant_tier_of
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
    tier = await tenant_tier_of(session, tenant_id=tenant_id)
    spent = 0
    for instance_type, model, price, priced_in, chip_us in (await session.execute(statement)).all():
        if price is None:  # not rated yet
            card = choose_card(
                await cards_for(session, instance_type=instance_type), model=model, tenant_tier=tier, at=now
            )
            if card is None:
                continue
            price, priced_in = card.price_per_chip_hour, card.currency
        if priced_in == currency:
            spent += cost_micros_ceil(int(chip_us), price)
    return spent
