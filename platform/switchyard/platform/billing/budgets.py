"""Budgets enforced at admission: reserve the estimated maximum, settle to the actual cost, or release.

Atomicity: each budget is charged by one conditional ``UPDATE`` (``... WHERE spent + reserved + amount <=
limit``), so two processes can never both pass the last check; budgets are updated in id order so
PostgreSQL row locks cannot deadlock. Passed a ``Database``, these functions run in their **own short
transaction** and commit before returning: a reservation must be visible to every other process before the
request's work is scheduled, and must not hold budget row locks (PostgreSQL) or the write lock (SQLite)
for the whole request. On SQLite that transaction starts with ``BEGIN IMMEDIATE``, taking the write lock
before the first read so the read-then-update cannot fail with a stale snapshot. Passed an ``AsyncSession``,
they run inside the caller's transaction (still atomic per statement; a refused reservation undoes the
charges it made on other budgets before raising).

A reservation not settled or released within ``RESERVATION_TTL`` is expired by the sweeper, which gives the
held amount back; settling an expired reservation still records the actual spend.

Alerts: when a settlement takes a budget's spend this month to one of its alert thresholds (its own
``alert_thresholds``, else ``ALERT_THRESHOLDS``), a ``BudgetAlert`` is recorded, once per budget, month and
threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, case, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped
from sqlmodel import col

from switchyard.platform.billing.errors import BudgetExceeded, ReservationNotFound
from switchyard.platform.billing.money import MICROS_PER_UNIT, cost_micros_ceil, currency_exponent
from switchyard.platform.billing.periods import month_start
from switchyard.platform.billing.rates import find_rate_card, tenant_tier_of
from switchyard.platform.billing.sql import insert_ignore
from switchyard.platform.billing.tx import own_transaction
from switchyard.platform.db import UNSCOPED, Database, TenantScope, new_id
from switchyard.platform.http.errors import Conflict, InvalidRequest
from switchyard.platform.models import Agent, ApiKey, Budget, BudgetAlert, BudgetReservation, RateCard, utc_now

__all__ = [
    "ALERT_THRESHOLDS",
    "MAX_ALERT_THRESHOLDS",
    "RESERVATION_TTL",
    "Reservation",
    "alert_thresholds_of",
    "check",
    "check_alert_thresholds",
    "check_budget_scope",
    "expire_reservations",
    "limit_micros",
    "release",
    "reserve",
    "settle",
    "tenant_has_budgets",
]

RESERVATION_TTL = timedelta(minutes=15)
ALERT_THRESHOLDS = (50, 80, 100)
"""Percentages of the limit that alert when a budget sets no thresholds of its own."""
MAX_ALERT_THRESHOLDS = 5
_SCOPES_OF_AGENT_IDS = ("agent", "workflow")
"""The budget scopes that name a row of ``agents`` (a workflow is stored as an agent of kind ``workflow``)."""


def check_alert_thresholds(values: Sequence[int]) -> list[int]:
    """``values`` as a budget stores them: 1 to 5 distinct whole percentages in 1..100, sorted.

    Raises ``ValueError`` saying what is wrong; a boolean is not a percentage (``True`` would read as 1).
    """
    if not 1 <= len(values) <= MAX_ALERT_THRESHOLDS:
        raise ValueError(f"give 1 to {MAX_ALERT_THRESHOLDS} alert thresholds, not {len(values)}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
            raise ValueError(f"an alert threshold is a whole percentage from 1 to 100, not {value!r}")
    if len(set(values)) != len(values):
        raise ValueError("alert thresholds must be distinct")
    return sorted(values)


def alert_thresholds_of(budget: Budget) -> tuple[int, ...]:
    """The percentages of ``budget``'s limit that alert: its own, else the defaults."""
    return tuple(budget.alert_thresholds) if budget.alert_thresholds else ALERT_THRESHOLDS


@dataclass(frozen=True, slots=True)
class Reservation:
    """Money held for one request; pass ``id`` to ``settle`` or ``release``."""

    id: str
    tenant_id: str
    status: str
    budget_ids: tuple[str, ...]
    currency: str
    price_per_chip_hour: Decimal
    amount_micros: int
    actual_micros: int | None
    expires_at: datetime

    @classmethod
    def of(cls, row: BudgetReservation) -> Reservation:
        return cls(
            id=row.id,
            tenant_id=row.tenant_id,
            status=row.status,
            budget_ids=tuple(row.budget_ids),
            currency=row.currency,
            price_per_chip_hour=row.price_per_chip_hour,
            amount_micros=row.amount_micros,
            actual_micros=row.actual_micros,
            expires_at=row.expires_at,
        )


def limit_micros(budget: Budget) -> int:
    """A budget's limit in micro-units of its currency."""
    scale: int = 10 ** (6 - currency_exponent(budget.currency))  # int ** int is typed Any (negative powers are float)
    return budget.limit_minor * scale


def _rolled(period: datetime, column: Mapped[int]) -> ColumnElement[int]:
    """``column`` as of ``period``: zero when the budget's stored month is older (a new month began)."""
    return case((col(Budget.period_start) < period, literal(0, BigInteger)), else_=column)


def _period_value(period: datetime) -> ColumnElement[datetime]:
    return case((col(Budget.period_start) < period, period), else_=col(Budget.period_start))


async def _applicable_budgets(
    session: AsyncSession, scope: TenantScope, api_key_id: str | None, agent_id: str | None, workflow_id: str | None
) -> list[Budget]:
    conditions = [col(Budget.scope_kind) == "tenant"]
    if api_key_id:
        conditions.append((col(Budget.scope_kind) == "api_key") & (col(Budget.scope_ref) == api_key_id))
    if agent_id:  # a workflow run's creation admits its first call as the workflow: its budgets are the workflow's
        conditions.append(col(Budget.scope_kind).in_(_SCOPES_OF_AGENT_IDS) & (col(Budget.scope_ref) == agent_id))
    if workflow_id:
        conditions.append((col(Budget.scope_kind) == "workflow") & (col(Budget.scope_ref) == workflow_id))
    statement = (
        select(Budget).where(col(Budget.tenant_id) == scope.tenant_id, or_(*conditions)).order_by(col(Budget.id))
    )
    return list((await session.execute(statement)).scalars())


async def _charge(session: AsyncSession, budget: Budget, period: datetime, amount: int, now: datetime) -> bool:
    over = _rolled(period, col(Budget.spent_micros)) + col(Budget.reserved_micros) + amount
    statement = (
        update(Budget)
        .where(col(Budget.id) == budget.id, col(Budget.tenant_id) == budget.tenant_id)
        .values(
            spent_micros=_rolled(period, col(Budget.spent_micros)),
            period_start=_period_value(period),
            reserved_micros=col(Budget.reserved_micros) + amount,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    if budget.hard:
        statement = statement.where(over <= col(Budget.limit_minor) * (10 ** (6 - currency_exponent(budget.currency))))
    return (await session.execute(statement)).rowcount == 1  # type: ignore[attr-defined,no-any-return]


async def _refusal(session: AsyncSession, budget: Budget, period: datetime, amount: int) -> BudgetExceeded:
    fresh = (
        await session.execute(
            select(Budget).where(col(Budget.id) == budget.id).execution_options(populate_existing=True)
        )
    ).scalar_one()
    return _exceeded(fresh, period, amount)


def _remaining_micros(budget: Budget, period: datetime) -> int:
    """What ``budget`` (as read) has left in the month starting ``period``: its limit less spend and holds."""
    spent = 0 if budget.period_start < period else budget.spent_micros
    return max(0, limit_micros(budget) - spent - budget.reserved_micros)


def _exceeded(budget: Budget, period: datetime, amount: int) -> BudgetExceeded:
    remaining = _remaining_micros(budget, period)
    name = "tenant budget" if budget.scope_kind == "tenant" else f"{budget.scope_kind} budget for {budget.scope_ref}"
    unit = Decimal(MICROS_PER_UNIT)
    return BudgetExceeded(
        f"{name} {budget.id} would be exceeded: {Decimal(remaining) / unit} {budget.currency} of "
        f"{Decimal(limit_micros(budget)) / unit} remain this month, the request may cost up to "
        f"{Decimal(amount) / unit} {budget.currency}",
        budget_id=budget.id,
        remaining_micros=remaining,
    )


async def tenant_has_budgets(session: AsyncSession, *, scope: TenantScope) -> bool:
    """Whether the tenant has any budget at all (callers skip reservations when it has none)."""
    statement = select(col(Budget.id)).where(col(Budget.tenant_id) == scope.tenant_id).limit(1)
    return (await session.execute(statement)).first() is not None


async def reserve(
    target: Database | AsyncSession,
    *,
    scope: TenantScope,
    api_key_id: str | None,
    agent_id: str | None,
    model: str,
    instance_type: str,
    estimated_chip_us: int,
    workflow_id: str | None = None,
    now: datetime | None = None,
    ttl: timedelta = RESERVATION_TTL,
) -> Reservation:
    """Hold the estimated maximum cost against every budget that applies (tenant, key, agent, and the workflow
    whose run makes the call).

    Raises ``BudgetExceeded`` (402, ``insufficient_quota``/``budget_exceeded``) naming the first hard budget
    that cannot cover it and what remains; nothing is held then. Raises ``NoApplicablePrice`` when the terms
    have no rate card. See the module docstring for the transaction this runs in.
    """
    now = now or utc_now()
    period = month_start(now)
    async with own_transaction(target, scope) as session:
        card, amount, budgets = await _priced_budgets(
            session, scope, api_key_id, agent_id, workflow_id, model, instance_type, estimated_chip_us, now
        )
        charged: list[Budget] = []
        for budget in budgets:
            if not await _charge(session, budget, period, amount, now):
                refusal = await _refusal(session, budget, period, amount)
                for done in charged:  # undo within the caller's transaction; our own one just rolls back
                    await _uncharge(session, done.id, done.tenant_id, amount)
                raise refusal
            charged.append(budget)
        row = BudgetReservation(
            id=new_id("res"),
            tenant_id=scope.tenant_id,
            budget_ids=[b.id for b in budgets],
            api_key_id=api_key_id,
            agent_id=agent_id,
            model=model,
            instance_type=instance_type,
            currency=card.currency,
            price_per_chip_hour=card.price_per_chip_hour,
            estimated_chip_us=estimated_chip_us,
            amount_micros=amount,
            status="held",
            created_at=now,
            expires_at=now + ttl,
        )
        session.add(row)
        await session.flush()
        return Reservation.of(row)


async def check(
    session: AsyncSession,
    *,
    scope: TenantScope,
    api_key_id: str | None,
    agent_id: str | None,
    model: str,
    instance_type: str,
    estimated_chip_us: int,
    workflow_id: str | None = None,
    now: datetime | None = None,
) -> None:
    """Refuse as :func:`reserve` would now, holding nothing: raises ``BudgetExceeded`` naming the first hard
    budget that cannot cover the estimated maximum cost, ``NoApplicablePrice`` when no rate card prices the call.
    Reads only (for a job's first call checked when the job is created: its worker takes the hold itself), so it
    is advice, not a ceiling: the hold taken later is what no spend can pass."""
    now = now or utc_now()
    period = month_start(now)
    _, amount, budgets = await _priced_budgets(
        session, scope, api_key_id, agent_id, workflow_id, model, instance_type, estimated_chip_us, now
    )
    for budget in budgets:
        if budget.hard and _remaining_micros(budget, period) < amount:
            raise _exceeded(budget, period, amount)


async def _priced_budgets(
    session: AsyncSession,
    scope: TenantScope,
    api_key_id: str | None,
    agent_id: str | None,
    workflow_id: str | None,
    model: str,
    instance_type: str,
    estimated_chip_us: int,
    now: datetime,
) -> tuple[RateCard, int, list[Budget]]:
    """The rate card pricing a call, the most it may cost (``estimated_chip_us`` at that price, rounded up) and the
    budgets it counts against, in id order. Raises ``Conflict`` when a budget is in another currency than the
    price."""
    if estimated_chip_us < 0:
        raise ValueError("estimated_chip_us must be >= 0")
    tier = await tenant_tier_of(session, tenant_id=scope.tenant_id)
    card = await find_rate_card(session, instance_type=instance_type, model=model, tenant_tier=tier, at=now)
    budgets = await _applicable_budgets(session, scope, api_key_id, agent_id, workflow_id)
    for budget in budgets:
        if budget.currency != card.currency:
            raise Conflict(
                f"budget {budget.id} is in {budget.currency} but {instance_type} is priced in {card.currency}",
                code="budget_currency_mismatch",
            )
    return card, cost_micros_ceil(estimated_chip_us, card.price_per_chip_hour), budgets


async def _uncharge(session: AsyncSession, budget_id: str, tenant_id: str, amount: int) -> None:
    await session.execute(
        update(Budget)
        .where(col(Budget.id) == budget_id, col(Budget.tenant_id) == tenant_id)
        .values(reserved_micros=col(Budget.reserved_micros) - amount)
        .execution_options(synchronize_session=False)
    )


async def _close(session: AsyncSession, row_id: str, tenant_id: str, from_status: str, values: dict[str, Any]) -> bool:
    statement = (
        update(BudgetReservation)
        .where(
            col(BudgetReservation.id) == row_id,
            col(BudgetReservation.tenant_id) == tenant_id,
            col(BudgetReservation.status) == from_status,
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return (await session.execute(statement)).rowcount == 1  # type: ignore[attr-defined,no-any-return]


async def _load(session: AsyncSession, scope: TenantScope, reservation_id: str) -> BudgetReservation:
    row = (
        await session.execute(
            select(BudgetReservation)
            .where(col(BudgetReservation.id) == reservation_id, col(BudgetReservation.tenant_id) == scope.tenant_id)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if row is None:
        raise ReservationNotFound(f"no reservation {reservation_id!r}")
    return row


async def _fire_alerts(session: AsyncSession, budget_ids: Sequence[str], tenant_id: str, now: datetime) -> None:
    if not budget_ids:
        return
    statement = select(Budget).where(col(Budget.id).in_(list(budget_ids)), col(Budget.tenant_id) == tenant_id)
    for budget in (await session.execute(statement.execution_options(populate_existing=True))).scalars():
        limit = limit_micros(budget)
        crossed = [pct for pct in alert_thresholds_of(budget) if limit > 0 and budget.spent_micros * 100 >= limit * pct]
        if not crossed:
            continue
        rows = [
            {
                "id": new_id("alrt"),
                "tenant_id": tenant_id,
                "budget_id": budget.id,
                "period_start": budget.period_start,
                "threshold_pct": pct,
                "spent_micros": budget.spent_micros,
                "created_at": now,
            }
            for pct in crossed
        ]
        index = ["budget_id", "period_start", "threshold_pct"]
        await session.execute(insert_ignore(session, BudgetAlert, index).values(rows))


async def settle(
    target: Database | AsyncSession,
    *,
    scope: TenantScope,
    reservation_id: str,
    actual_chip_us: int,
    now: datetime | None = None,
) -> Reservation:
    """Replace the held amount by the actual cost (at the reservation's price) and fire budget alerts.

    Idempotent: settling a reservation that is already settled or released changes nothing. Settling an
    expired one records the spend (the work happened) without giving back a hold that was already returned.
    """
    if actual_chip_us < 0:
        raise ValueError("actual_chip_us must be >= 0")
    now = now or utc_now()
    period = month_start(now)
    async with own_transaction(target, scope) as session:
        row = await _load(session, scope, reservation_id)
        actual = cost_micros_ceil(actual_chip_us, row.price_per_chip_hour)
        values = {"status": "settled", "actual_chip_us": actual_chip_us, "actual_micros": actual, "closed_at": now}
        held = 0
        if await _close(session, row.id, row.tenant_id, "held", values):
            held = row.amount_micros
        elif not await _close(session, row.id, row.tenant_id, "expired", values):
            return Reservation.of(await _load(session, scope, reservation_id))
        for budget_id in sorted(row.budget_ids):  # one row at a time, in id order: no lock-order deadlocks
            await session.execute(
                update(Budget)
                .where(col(Budget.id) == budget_id, col(Budget.tenant_id) == row.tenant_id)
                .values(
                    spent_micros=_rolled(period, col(Budget.spent_micros)) + actual,
                    period_start=_period_value(period),
                    reserved_micros=col(Budget.reserved_micros) - held,
                    updated_at=now,
                )
                .execution_options(synchronize_session=False)
            )
        await _fire_alerts(session, row.budget_ids, row.tenant_id, now)
        return Reservation.of(await _load(session, scope, reservation_id))


async def release(
    target: Database | AsyncSession, *, scope: TenantScope, reservation_id: str, now: datetime | None = None
) -> Reservation:
    """Give the held amount back (the request failed before using compute). Idempotent."""
    now = now or utc_now()
    async with own_transaction(target, scope) as session:
        row = await _load(session, scope, reservation_id)
        if await _close(session, row.id, row.tenant_id, "held", {"status": "released", "closed_at": now}):
            for budget_id in sorted(row.budget_ids):
                await _uncharge(session, budget_id, row.tenant_id, row.amount_micros)
        return Reservation.of(await _load(session, scope, reservation_id))


async def expire_reservations(target: Database | AsyncSession, *, now: datetime | None = None) -> int:
    """Expire held reservations past ``expires_at``, giving their holds back; returns how many. Idempotent."""
    now = now or utc_now()
    async with own_transaction(target, UNSCOPED) as session:
        statement = select(BudgetReservation).where(
            col(BudgetReservation.status) == "held", col(BudgetReservation.expires_at) < now
        )
        expired = 0
        give_back: dict[tuple[str, str], int] = {}
        for row in list((await session.execute(statement)).scalars()):
            if await _close(session, row.id, row.tenant_id, "held", {"status": "expired", "closed_at": now}):
                expired += 1
                for budget_id in row.budget_ids:
                    key = (budget_id, row.tenant_id)
                    give_back[key] = give_back.get(key, 0) + row.amount_micros
        for (budget_id, tenant_id), amount in sorted(give_back.items()):  # budgets in id order, once each
            await _uncharge(session, budget_id, tenant_id, amount)
        return expired


async def check_budget_scope(session: AsyncSession, scope: TenantScope, *, kind: str, scope_id: str) -> None:
    """Refuse (400 naming ``scope_id``) a budget that would apply to nothing: ``scope_id`` is empty for the
    tenant's budget, else a working API key, an agent or a workflow of the caller's tenant (as ``kind`` says).
    Another tenant's id reads as unknown, like any id that does not exist."""

    def refuse(message: str) -> InvalidRequest:
        return InvalidRequest(message, param="scope_id", code="invalid_value")

    if kind == "tenant":
        if scope_id:
            raise refuse("scope_id must be empty for a tenant budget")
        return
    if not scope_id:
        raise refuse(f"scope_id is required for a budget of scope {kind!r}")
    if kind == "api_key":
        key = (
            await session.execute(
                select(ApiKey).where(col(ApiKey.tenant_id) == scope.tenant_id, col(ApiKey.id) == scope_id)
            )
        ).scalar_one_or_none()
        if key is None:
            raise refuse(f"scope_id {scope_id!r} is not an API key of this tenant")
        if key.revoked_at is not None or (key.expires_at is not None and key.expires_at <= utc_now()):
            raise refuse(f"API key {scope_id!r} is revoked or expired: its budget would apply to nothing")
        return
    agent = (
        await session.execute(select(Agent).where(col(Agent.tenant_id) == scope.tenant_id, col(Agent.id) == scope_id))
    ).scalar_one_or_none()
    if agent is None or agent.deleted_at is not None or agent.kind != kind:  # (a workflow is an agent of its kind)
        raise refuse(
            f"scope_id {scope_id!r} is not {'a workflow' if kind == 'workflow' else 'an agent'} of this tenant"
        )
