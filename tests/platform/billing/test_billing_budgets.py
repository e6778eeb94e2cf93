"""Budgets: reserve the estimate, settle to actual, release, expire; refusals name the budget; alerts once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from switchyard.platform.billing import budgets
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.db import Database, TenantScope, new_id
from switchyard.platform.models import Budget, BudgetAlert

NOW = datetime(2026, 11, 10, 12, tzinfo=UTC)
# trn2.48xlarge: 2.93625 USD per chip-hour, so one chip-hour is 2,936,250 micro-USD.
CHIP_HOUR = 3_600_000_000


async def add_budget(
    database: Database,
    scope: TenantScope,
    *,
    limit_minor: int,
    kind: str = "tenant",
    ref: str = "",
    hard: bool = True,
    alert_thresholds: list[int] | None = None,
) -> str:
    async with database.unit_of_work(scope) as session:
        row = Budget(
            id=new_id("bud"),
            tenant_id=scope.tenant_id,
            scope_kind=kind,
            scope_ref=ref,
            currency="USD",
            limit_minor=limit_minor,
            hard=hard,
            alert_thresholds=alert_thresholds,
            period_start=datetime(2026, 11, 1, tzinfo=UTC),
        )
        session.add(row)
    return row.id


async def budget(database: Database, scope: TenantScope, budget_id: str) -> Budget:
    async with database.unit_of_work(scope) as session:
        return (await session.execute(select(Budget).where(Budget.id == budget_id))).scalar_one()


def _reserve(database: Database, scope: TenantScope, chip_us: int, **kw: Any) -> Any:
    return budgets.reserve(
        database,
        scope=scope,
        api_key_id=kw.pop("api_key_id", None),
        agent_id=kw.pop("agent_id", None),
        model="llama-3.1-8b",
        instance_type="trn2.48xlarge",
        estimated_chip_us=chip_us,
        now=kw.pop("now", NOW),
        **kw,
    )


async def test_reserve_settle_release(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    bud = await add_budget(database, scope, limit_minor=1000)  # 10.00 USD
    first = await _reserve(database, scope, 2 * CHIP_HOUR)
    assert first.amount_micros == 5_872_500
    assert first.budget_ids == (bud,)
    assert (await budget(database, scope, bud)).reserved_micros == 5_872_500
    with pytest.raises(BudgetExceeded) as refused:
        await _reserve(database, scope, 2 * CHIP_HOUR)
    assert refused.value.status_code == 402
    assert refused.value.code == "budget_exceeded"
    assert refused.value.error_type == "insufficient_quota"
    assert bud in refused.value.message
    assert "4.1275 USD" in refused.value.message
    assert (await budget(database, scope, bud)).reserved_micros == 5_872_500  # the refusal held nothing
    settled = await budgets.settle(database, scope=scope, reservation_id=first.id, actual_chip_us=CHIP_HOUR, now=NOW)
    assert settled.status == "settled"
    assert settled.actual_micros == 2_936_250
    again = await budgets.settle(database, scope=scope, reservation_id=first.id, actual_chip_us=CHIP_HOUR, now=NOW)
    assert again.actual_micros == 2_936_250  # idempotent
    row = await budget(database, scope, bud)
    assert (row.spent_micros, row.reserved_micros) == (2_936_250, 0)
    second = await _reserve(database, scope, 2 * CHIP_HOUR)
    released = await budgets.release(database, scope=scope, reservation_id=second.id, now=NOW)
    assert released.status == "released"
    await budgets.release(database, scope=scope, reservation_id=second.id, now=NOW)
    row = await budget(database, scope, bud)
    assert (row.spent_micros, row.reserved_micros) == (2_936_250, 0)


async def test_a_check_refuses_as_a_reservation_would_and_holds_nothing(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    bud = await add_budget(database, scope, limit_minor=1000)  # 10.00 USD
    await add_budget(database, scope, limit_minor=1, kind="api_key", ref="key_a", hard=False)  # refuses nothing

    async def check(chip_us: int, now: datetime = NOW) -> None:
        async with database.unit_of_work(scope) as session:
            await budgets.check(
                session,
                scope=scope,
                api_key_id="key_a",
                agent_id=None,
                model="llama-3.1-8b",
                instance_type="trn2.48xlarge",
                estimated_chip_us=chip_us,
                now=now,
            )

    await check(3 * CHIP_HOUR)  # 8.80875 of 10.00 USD
    held = await _reserve(database, scope, 2 * CHIP_HOUR)  # 5.8725 held: 4.1275 remain
    with pytest.raises(BudgetExceeded) as refused:
        await check(2 * CHIP_HOUR)
    assert (refused.value.status_code, refused.value.budget_id) == (402, bud)
    assert "4.1275 USD" in refused.value.message
    await check(CHIP_HOUR)
    assert (await budget(database, scope, bud)).reserved_micros == held.amount_micros  # the checks held nothing
    await budgets.settle(database, scope=scope, reservation_id=held.id, actual_chip_us=2 * CHIP_HOUR, now=NOW)
    with pytest.raises(BudgetExceeded):  # spent now, not held: 4.1275 remain this month
        await check(2 * CHIP_HOUR)
    await check(3 * CHIP_HOUR, now=NOW + timedelta(days=30))  # next month, this month's spend is not counted


async def test_key_and_agent_budgets_apply_and_soft_budgets_only_track(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    soft = await add_budget(database, scope, limit_minor=1, hard=False)
    key_budget = await add_budget(database, scope, limit_minor=300, kind="api_key", ref="key_a")
    await add_budget(database, scope, limit_minor=1, kind="agent", ref="agent_other")
    held = await _reserve(database, scope, CHIP_HOUR, api_key_id="key_a", agent_id="agent_x")
    assert set(held.budget_ids) == {soft, key_budget}
    with pytest.raises(BudgetExceeded) as refused:
        await _reserve(database, scope, CHIP_HOUR, api_key_id="key_a")
    assert refused.value.budget_id == key_budget
    assert "api_key budget for key_a" in refused.value.message
    assert (await budget(database, scope, soft)).reserved_micros == held.amount_micros  # refusal undone


async def test_alerts_fire_once_per_period_and_months_roll_over(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    bud = await add_budget(database, scope, limit_minor=1000, hard=False)
    for _ in range(2):
        held = await _reserve(database, scope, 2 * CHIP_HOUR)
        await budgets.settle(database, scope=scope, reservation_id=held.id, actual_chip_us=2 * CHIP_HOUR, now=NOW)
    async with database.unit_of_work(scope) as session:
        fired = (await session.execute(select(BudgetAlert.threshold_pct))).scalars().all()
    assert sorted(fired) == [50, 80, 100]  # 58.7 % then 117.5 %: 50 once, then 80 and 100
    december = datetime(2026, 12, 2, tzinfo=UTC)
    held = await _reserve(database, scope, CHIP_HOUR, now=december)
    await budgets.settle(database, scope=scope, reservation_id=held.id, actual_chip_us=CHIP_HOUR, now=december)
    row = await budget(database, scope, bud)
    assert row.period_start == datetime(2026, 12, 1, tzinfo=UTC)
    assert row.spent_micros == 2_936_250


async def _fired(database: Database, scope: TenantScope, budget_id: str) -> list[tuple[int, int]]:
    async with database.unit_of_work(scope) as session:
        statement = select(BudgetAlert.threshold_pct, BudgetAlert.spent_micros).where(
            BudgetAlert.budget_id == budget_id
        )
        return sorted((pct, spent) for pct, spent in (await session.execute(statement)).all())


async def _spend(database: Database, scope: TenantScope, chip_us: int, **kw: Any) -> None:
    held = await _reserve(database, scope, chip_us, **kw)
    await budgets.settle(database, scope=scope, reservation_id=held.id, actual_chip_us=chip_us, now=NOW)


async def test_a_budget_s_own_thresholds_fire_once_each_instead_of_the_defaults(
    database: Database, new_tenant: Any
) -> None:
    scope = await new_tenant()
    own = await add_budget(database, scope, limit_minor=1000, hard=False, alert_thresholds=[10, 30])
    default = await add_budget(database, scope, limit_minor=1000, kind="agent", ref="agent_x", hard=False)
    await _spend(database, scope, CHIP_HOUR // 2, agent_id="agent_x")  # 1.468125 USD: 14.7 % of each
    assert await _fired(database, scope, own) == [(10, 1_468_125)]
    assert await _fired(database, scope, default) == []  # null: 50, 80, 100 — nothing yet
    await _spend(database, scope, CHIP_HOUR // 2, agent_id="agent_x")  # 29.4 %: no new threshold
    assert await _fired(database, scope, own) == [(10, 1_468_125)]  # 10 % fired once, not again
    await _spend(database, scope, CHIP_HOUR, agent_id="agent_x")  # 58.7 %
    assert await _fired(database, scope, own) == [(10, 1_468_125), (30, 5_872_500)]
    assert await _fired(database, scope, default) == [(50, 5_872_500)]  # the defaults still apply


def test_alert_thresholds_are_one_to_five_distinct_percentages_stored_sorted() -> None:
    assert budgets.check_alert_thresholds([90, 10, 50]) == [10, 50, 90]
    assert budgets.check_alert_thresholds([100]) == [100]
    for bad in ([], [0], [101], [10, 10], [1, 2, 3, 4, 5, 6], [True], [12.5]):
        with pytest.raises(ValueError, match="alert threshold"):
            budgets.check_alert_thresholds(bad)  # type: ignore[arg-type]


async def test_expired_reservations_give_the_hold_back(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    bud = await add_budget(database, scope, limit_minor=1000)
    held = await _reserve(database, scope, 3 * CHIP_HOUR)
    assert await budgets.expire_reservations(database, now=NOW + timedelta(minutes=10)) == 0
    assert await budgets.expire_reservations(database, now=NOW + timedelta(minutes=16)) == 1
    assert await budgets.expire_reservations(database, now=NOW + timedelta(minutes=17)) == 0
    assert (await budget(database, scope, bud)).reserved_micros == 0
    late = await budgets.settle(database, scope=scope, reservation_id=held.id, actual_chip_us=CHIP_HOUR, now=NOW)
    assert late.status == "settled"
    row = await budget(database, scope, bud)
    assert (row.spent_micros, row.reserved_micros) == (2_936_250, 0)
