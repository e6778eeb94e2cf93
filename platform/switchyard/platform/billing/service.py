"""Billing operations behind the HTTP API: rate cards (operators), budgets, invoices and usage (tenants)."""

from __future__ import annotations

import calendar
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.audit.service import record, record_operator
from switchyard.platform.auth.principal import Actor
from switchyard.platform.billing.budgets import check_budget_scope
from switchyard.platform.billing.invoices import compute_lines
from switchyard.platform.billing.money import UnknownCurrency, currency_exponent
from switchyard.platform.billing.periods import month_start
from switchyard.platform.billing.rates import check_instance_type, is_baseline
from switchyard.platform.billing.rates import create_rate_card as add_rate_card
from switchyard.platform.billing.schemas import (
    BudgetAlertPublic,
    BudgetPublic,
    BudgetSet,
    InvoicePublic,
    RateCardCreate,
    RateCardPublic,
    UsageBucketPublic,
    UsagePage,
)
from switchyard.platform.billing.spend import spent_in_period
from switchyard.platform.billing.usage import BucketWidth, UsageBucket, read_usage
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.bodies import stored_integer
from switchyard.platform.http.errors import Conflict, InvalidRequest, NotFound
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.http.timestamps import MAX_UNIX_SECONDS
from switchyard.platform.models import Budget, BudgetAlert, Invoice, RateCard, UsageEvent, utc_now

__all__ = [
    "create_rate_card",
    "delete_budget",
    "delete_rate_card",
    "get_budget",
    "get_invoice",
    "list_budget_alerts",
    "list_budgets",
    "list_invoices",
    "list_rate_cards",
    "set_budget",
    "usage_buckets",
    "usage_page",
]

BACKDATE_TOLERANCE = timedelta(minutes=5)
"""Rate cards may not start in the past (rated events would disagree with them); clocks may differ a little."""


async def list_rate_cards(
    session: AsyncSession, *, params: CursorParams, instance_type: str | None = None
) -> Page[RateCardPublic]:
    statement = select(RateCard)
    if instance_type:
        statement = statement.where(col(RateCard.instance_type) == instance_type)
    return await paginate(session, statement, col(RateCard.id), params, RateCardPublic.of)


async def create_rate_card(session: AsyncSession, *, actor: Actor, data: RateCardCreate) -> RateCardPublic:
    """Add a rate card version (operator). Backdating is refused: events already rated keep their price; an instance
    type outside the hardware catalog must be spelt ``custom:<name>`` (a misspelt one would never price anything)."""
    now = utc_now()
    effective_from = data.effective_from or now
    if effective_from < now - BACKDATE_TOLERANCE:
        raise InvalidRequest(
            "effective_from is in the past: prices of usage already rated cannot change", param="effective_from"
        )
    try:
        check_instance_type(data.instance_type)
    except ValueError as error:
        raise InvalidRequest(str(error), param="instance_type", code="invalid_value") from None
    try:
        currency_exponent(data.currency)
    except UnknownCurrency as error:
        raise InvalidRequest(str(error), param="currency", code="invalid_value") from None
    duplicate = await session.execute(
        select(col(RateCard.id)).where(
            col(RateCard.instance_type) == data.instance_type,
            col(RateCard.model) == data.model,
            col(RateCard.tenant_tier) == data.tenant_tier,
            col(RateCard.effective_from) == effective_from,
        )
    )
    if duplicate.first() is not None:
        raise Conflict("a rate card for these terms already starts at that time", code="rate_card_exists")
    card = await add_rate_card(
        session,
        instance_type=data.instance_type,
        price_per_chip_hour=Decimal(data.price_per_chip_hour),
        currency=data.currency,
        model=data.model,
        tenant_tier=data.tenant_tier,
        effective_from=effective_from,
        source=data.source,
    )
    public = RateCardPublic.of(card)
    record_operator(
        session,
        actor=actor,
        action="rate_card.create",
        target_type="rate_card",
        target_id=card.id,
        details=public.model_dump(mode="json", exclude={"object", "id", "created_at"}),
    )
    return public


async def delete_rate_card(session: AsyncSession, *, actor: Actor, rate_card_id: str) -> str:
    """Withdraw a rate card that has priced nothing (operator), e.g. a future price with a typo: versions are never
    edited, and one at the same ``effective_from`` is refused, so without this a mistaken card stays. A card that
    priced usage stays (409 ``rate_card_in_use``: its invoices must stay explainable; add a newer version), and so
    does a catalog baseline card (409 ``rate_card_baseline``: it would be seeded again)."""
    card = await session.get(RateCard, rate_card_id)
    if card is None:
        raise NotFound(f"no rate card {rate_card_id!r}", param="rate_card_id")
    if is_baseline(card):
        raise Conflict(
            f"rate card {card.id} is the hardware catalog's baseline price of {card.instance_type}: add a newer "
            "version to change it",
            param="rate_card_id",
            code="rate_card_baseline",
        )
    priced = await session.execute(
        select(func.count()).select_from(UsageEvent).where(col(UsageEvent.rate_card_id) == card.id)
    )
    if count := int(priced.scalar_one()):
        raise Conflict(
            f"rate card {card.id} priced {count} usage events: it stays so that their invoices can be explained; "
            "add a newer version to change the price",
            param="rate_card_id",
            code="rate_card_in_use",
        )
    public = RateCardPublic.of(card)
    await session.delete(card)
    record_operator(
        session,
        actor=actor,
        action="rate_card.delete",
        target_type="rate_card",
        target_id=card.id,
        details=public.model_dump(mode="json", exclude={"object", "id", "created_at"}),
    )
    await session.flush()
    return card.id


async def _budget_public(session: AsyncSession, row: Budget) -> BudgetPublic:
    period = month_start(utc_now())
    alerts = await session.execute(
        select(col(BudgetAlert.threshold_pct))
        .where(col(BudgetAlert.budget_id) == row.id, col(BudgetAlert.period_start) == period)
        .order_by(col(BudgetAlert.threshold_pct))
    )
    return BudgetPublic.of(row, current_period=period, alerts=list(alerts.scalars()))


async def _find_budget(session: AsyncSession, scope: TenantScope, budget_id: str) -> Budget:
    row = (
        await session.execute(
            select(Budget).where(col(Budget.tenant_id) == scope.tenant_id, col(Budget.id) == budget_id)
        )
    ).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no budget {budget_id!r}", param="budget_id")
    return row


async def set_budget(session: AsyncSession, *, scope: TenantScope, actor: Actor, data: BudgetSet) -> BudgetPublic:
    """Create the budget of (scope, scope_id) or replace its limit, kind and alert thresholds. A new budget starts
    at what its scope has spent since the month began (``billing.spend``); a replaced one keeps its spend, and the
    alerts already fired are kept (a threshold added below the spend fires with the next settlement)."""
    await check_budget_scope(session, scope, kind=data.scope, scope_id=data.scope_id)
    try:
        currency_exponent(data.currency)
    except UnknownCurrency as error:
        raise InvalidRequest(str(error), param="currency", code="invalid_value") from None
    row = (
        await session.execute(
            select(Budget).where(
                col(Budget.tenant_id) == scope.tenant_id,
                col(Budget.scope_kind) == data.scope,
                col(Budget.scope_ref) == data.scope_id,
            )
        )
    ).scalar_one_or_none()
    now = utc_now()
    if row is None:
        period = month_start(now)
        row = Budget(
            id=new_id("bud"),
            tenant_id=scope.tenant_id,
            scope_kind=data.scope,
            scope_ref=data.scope_id,
            currency=data.currency,
            limit_minor=data.limit_minor,
            hard=data.hard,
            alert_thresholds=data.alert_thresholds,
            period_start=period,
            # its period began on the 1st: what the scope spent since then counts, not only what settles from now on
            spent_micros=await spent_in_period(
                session,
                tenant_id=scope.tenant_id,
                scope_kind=data.scope,
                scope_ref=data.scope_id,
                currency=data.currency,
                period_start=period,
                now=now,
            ),
        )
        session.add(row)
    else:
        if row.currency != data.currency and (row.spent_micros or row.reserved_micros):
            raise Conflict("a budget with spend cannot change currency", param="currency", code="currency_locked")
        row.currency, row.limit_minor, row.hard, row.updated_at = data.currency, data.limit_minor, data.hard, now
        row.alert_thresholds = data.alert_thresholds
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="budget.set",
        target_type="budget",
        target_id=row.id,
        details=data.model_dump(mode="json"),
    )
    await session.flush()
    return await _budget_public(session, row)


async def list_budgets(session: AsyncSession, *, scope: TenantScope, params: CursorParams) -> Page[BudgetPublic]:
    statement = select(Budget).where(col(Budget.tenant_id) == scope.tenant_id)
    page = await paginate(session, statement, col(Budget.id), params, lambda row: row)
    data = [await _budget_public(session, row) for row in page.data]
    return Page(data=data, first_id=page.first_id, last_id=page.last_id, has_more=page.has_more)


async def list_budget_alerts(session: AsyncSession, *, scope: TenantScope, limit: int = 50) -> list[BudgetAlertPublic]:
    """The alerts fired this month (UTC) on the tenant's budgets, newest first (a removed budget's are gone)."""
    statement = (
        select(BudgetAlert, Budget)
        .join(Budget, col(Budget.id) == col(BudgetAlert.budget_id))
        .where(
            col(BudgetAlert.tenant_id) == scope.tenant_id,
            col(Budget.tenant_id) == scope.tenant_id,
            col(BudgetAlert.period_start) == month_start(utc_now()),
        )
        .order_by(col(BudgetAlert.created_at).desc(), col(BudgetAlert.threshold_pct).desc())
        .limit(limit)
    )
    return [BudgetAlertPublic.of(alert, budget) for alert, budget in (await session.execute(statement)).all()]


async def get_budget(session: AsyncSession, *, scope: TenantScope, budget_id: str) -> BudgetPublic:
    return await _budget_public(session, await _find_budget(session, scope, budget_id))


async def delete_budget(session: AsyncSession, *, scope: TenantScope, actor: Actor, budget_id: str) -> str:
    """Remove a budget; reservations still held against it settle without it."""
    row = await _find_budget(session, scope, budget_id)
    await session.execute(delete(BudgetAlert).where(col(BudgetAlert.budget_id) == row.id))
    await session.delete(row)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="budget.delete",
        target_type="budget",
        target_id=row.id,
        details={"scope": row.scope_kind, "scope_id": row.scope_ref},
    )
    await session.flush()
    return row.id


async def _invoice_public(session: AsyncSession, row: Invoice) -> InvoicePublic:
    return InvoicePublic.of(row, await compute_lines(session, invoice=row))


async def list_invoices(session: AsyncSession, *, scope: TenantScope, params: CursorParams) -> Page[InvoicePublic]:
    statement = select(Invoice).where(col(Invoice.tenant_id) == scope.tenant_id)
    page = await paginate(session, statement, col(Invoice.id), params, lambda row: row)
    data = [await _invoice_public(session, row) for row in page.data]
    return Page(data=data, first_id=page.first_id, last_id=page.last_id, has_more=page.has_more)


async def get_invoice(session: AsyncSession, *, scope: TenantScope, invoice_id: str) -> InvoicePublic:
    row = (
        await session.execute(
            select(Invoice).where(col(Invoice.tenant_id) == scope.tenant_id, col(Invoice.id) == invoice_id)
        )
    ).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no invoice {invoice_id!r}", param="invoice_id")
    return await _invoice_public(session, row)


def _window(start_time: int | None, end_time: int | None) -> tuple[datetime, datetime]:
    now = utc_now()
    start = datetime.fromtimestamp(start_time, UTC) if start_time is not None else month_start(now)
    end = datetime.fromtimestamp(end_time, UTC) if end_time is not None else now
    if end <= start:
        raise InvalidRequest("end_time must be after start_time", param="end_time", code="invalid_value")
    return start, end


async def usage_buckets(
    session: AsyncSession,
    *,
    scope: TenantScope,
    start_time: int | None,
    end_time: int | None,
    width: BucketWidth,
    group_by: Sequence[str],
) -> list[UsageBucket]:
    """All buckets of the window (default: this month so far)."""
    start, end = _window(start_time, end_time)
    try:
        return await read_usage(session, scope=scope, start=start, end=end, width=width, group_by=group_by)
    except ValueError as error:
        raise InvalidRequest(str(error), param="start_time", code="invalid_value") from None


async def usage_page(
    session: AsyncSession,
    *,
    scope: TenantScope,
    start_time: int | None,
    end_time: int | None,
    width: BucketWidth,
    group_by: Sequence[str],
    limit: int,
    page: str | None,
) -> UsagePage:
    """One page of ``limit`` buckets; ``page`` is the cursor from the previous page's ``next_page``."""
    if page is not None:  # the `next_page` of a previous page
        start_time = stored_integer(page, param="page", minimum=0, maximum=MAX_UNIX_SECONDS)
    buckets = await usage_buckets(
        session, scope=scope, start_time=start_time, end_time=end_time, width=width, group_by=group_by
    )
    shown, rest = buckets[:limit], buckets[limit:]
    next_page = str(calendar.timegm(rest[0].start.utctimetuple())) if rest else None
    return UsagePage(data=[UsageBucketPublic.of(b) for b in shown], has_more=bool(rest), next_page=next_page)
