"""A Hypothesis state machine over the billing life cycle, checked against a plain-Python model at every step.

Rules: ingest a receipt (possibly late, for an earlier month), ingest a duplicate, rate, add a rate card
version, reserve/settle/release/expire budget holds, let time pass, finalize due invoices. Invariants: the
ledger holds each receipt once; every rated event has the price the model expects for its time; every
finalized invoice equals its first snapshot forever and its total is the sum of its lines; every line's
chip-µs is the sum of its events; billed + unbilled chip-µs = everything ingested; holds are never negative
and equal the open reservations; a budget's spend equals the reservations settled in its month.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import select

from switchyard.platform.auth.principal import Actor
from switchyard.platform.billing import budgets
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.billing.invoices import finalize_due
from switchyard.platform.billing.ledger import UsageEventCreate, rate_events, record_usage
from switchyard.platform.billing.rates import create_rate_card
from switchyard.platform.db import UNSCOPED, Database, TenantScope, new_id
from switchyard.platform.models import Budget, BudgetReservation, Invoice, InvoiceLine, UsageEvent
from switchyard.platform.tenants.service import create_tenant

T = TypeVar("T")
START = datetime(2026, 10, 28, tzinfo=UTC)
BASELINE = Decimal("2.936250000000000")  # trn2.48xlarge from the hardware catalog: 46.98 / 16
_databases = itertools.count()


class BillingMachine(RuleBasedStateMachine):
    template: Path
    workdir: Path

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        path = self.workdir / f"machine-{next(_databases)}.db"
        shutil.copyfile(self.template, path)
        self.database = Database(f"sqlite+aiosqlite:///{path}")
        self.now = START
        self.receipts: dict[str, int] = {}  # event id -> chip-µs
        self.cards: list[tuple[datetime, Decimal]] = []  # operator cards (effective_from, price)
        self.held: dict[str, int] = {}  # reservation id -> held micros
        self.spent_by_month: dict[datetime, int] = {}  # month of the settle -> settled micros
        self.snapshots: dict[str, Any] = {}

    def run(self, job: Awaitable[T]) -> T:
        return self.loop.run_until_complete(job)

    def teardown(self) -> None:
        self.run(self.database.dispose())
        self.loop.close()

    @initialize()
    def make_tenant(self) -> None:
        async def make() -> TenantScope:
            async with self.database.unit_of_work(UNSCOPED) as session:
                created = await create_tenant(session, actor=Actor("t", None), name="sm", owner_email=None)
            scope = TenantScope(created.id)
            async with self.database.unit_of_work(scope) as session:
                session.add(
                    Budget(
                        id=new_id("bud"),
                        tenant_id=scope.tenant_id,
                        scope_kind="tenant",
                        currency="USD",
                        limit_minor=10**6,  # 10,000 USD: never reached, so spend is only ever tracked
                        period_start=datetime(2026, 10, 1, tzinfo=UTC),
                    )
                )
            return scope

        self.scope = self.run(make())

    # ---- rules ----

    @rule(
        chip_us=st.one_of(st.just(0), st.integers(10**8, 10**11)),
        late_hours=st.sampled_from([0, 1, 24 * 10, 24 * 40]),
        model=st.sampled_from(["m", "n"]),
    )
    def ingest(self, chip_us: int, late_hours: int, model: str) -> None:
        event_id = f"req_{len(self.receipts)}"
        occurred_at = max(START, self.now - timedelta(hours=late_hours, microseconds=1))
        event = UsageEventCreate(
            event_id=event_id, model=model, instance_type="trn2.48xlarge", chip_us=chip_us, occurred_at=occurred_at
        )

        async def record() -> bool:
            async with self.database.unit_of_work(self.scope) as session:
                return await record_usage(session, scope=self.scope, event=event)

        assert self.run(record()) is True
        self.receipts[event_id] = chip_us

    @precondition(lambda self: self.receipts)
    @rule(data=st.data())
    def ingest_duplicate(self, data: st.DataObject) -> None:
        event_id = data.draw(st.sampled_from(sorted(self.receipts)))
        event = UsageEventCreate(
            event_id=event_id, model="m", instance_type="trn2.48xlarge", chip_us=1, occurred_at=self.now
        )

        async def record() -> bool:
            async with self.database.unit_of_work(self.scope) as session:
                return await record_usage(session, scope=self.scope, event=event)

        assert self.run(record()) is False

    @rule()
    def rate(self) -> None:
        async def rate_all() -> None:
            while True:
                async with self.database.unit_of_work(UNSCOPED) as session:
                    if not (await rate_events(session)).rated:
                        return

        self.run(rate_all())

    @rule(price=st.decimals(min_value=0, max_value=100, places=15, allow_nan=False, allow_infinity=False))
    def change_rate_card(self, price: Decimal) -> None:
        effective_from = self.now + timedelta(microseconds=len(self.cards) + 1)

        async def add() -> None:
            async with self.database.unit_of_work(UNSCOPED) as session:
                await create_rate_card(
                    session, instance_type="trn2.48xlarge", price_per_chip_hour=price, effective_from=effective_from
                )

        self.run(add())
        self.cards.append((effective_from, price))

    @rule(hours=st.sampled_from([1, 24, 24 * 7, 24 * 20, 24 * 35]))
    def time_passes(self, hours: int) -> None:
        self.now += timedelta(hours=hours)

    @rule()
    def finalize(self) -> None:
        self.run(finalize_due(self.database, now=self.now))

    @rule()
    def close_month(self) -> None:
        """Period close: jump past the next month's grace period, rate what is pending, finalize."""
        month = self.now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        self.now = (month + timedelta(days=32)).replace(day=2, hour=1)
        self.rate()
        self.finalize()

    @rule(chip_us=st.integers(0, 10**10))
    def reserve(self, chip_us: int) -> None:
        try:
            held = self.run(
                budgets.reserve(
                    self.database,
                    scope=self.scope,
                    api_key_id=None,
                    agent_id=None,
                    model="m",
                    instance_type="trn2.48xlarge",
                    estimated_chip_us=chip_us,
                    now=self.now,
                )
            )
        except BudgetExceeded:  # pragma: no cover - the limit is out of reach by construction
            raise AssertionError("the tenant budget is never reached in this machine") from None
        self.held[held.id] = held.amount_micros

    @precondition(lambda self: self.held)
    @rule(data=st.data(), fraction=st.fractions(0, 1))
    def settle(self, data: st.DataObject, fraction: Any) -> None:
        reservation_id = data.draw(st.sampled_from(sorted(self.held)))
        row = self._reservation(reservation_id)
        actual = row.estimated_chip_us * fraction.numerator // fraction.denominator
        settled = self.run(
            budgets.settle(
                self.database, scope=self.scope, reservation_id=reservation_id, actual_chip_us=actual, now=self.now
            )
        )
        del self.held[reservation_id]
        month = self.now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        self.spent_by_month[month] = self.spent_by_month.get(month, 0) + (settled.actual_micros or 0)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        reservation_id = data.draw(st.sampled_from(sorted(self.held)))
        self.run(budgets.release(self.database, scope=self.scope, reservation_id=reservation_id, now=self.now))
        del self.held[reservation_id]

    @rule()
    def expire(self) -> None:
        self.run(budgets.expire_reservations(self.database, now=self.now))
        for reservation_id in list(self.held):
            if self._reservation(reservation_id).status == "expired":
                del self.held[reservation_id]

    # ---- helpers ----

    def _reservation(self, reservation_id: str) -> BudgetReservation:
        async def load() -> BudgetReservation:
            async with self.database.unit_of_work(self.scope) as session:
                return (
                    await session.execute(select(BudgetReservation).where(BudgetReservation.id == reservation_id))
                ).scalar_one()

        return self.run(load())

    def _budget(self) -> Budget:
        async def load() -> Budget:
            async with self.database.unit_of_work(self.scope) as session:
                return (await session.execute(select(Budget))).scalar_one()

        return self.run(load())

    def expected_price(self, at: datetime) -> Decimal:
        applicable = [(start, price) for start, price in self.cards if start <= at]
        return max(applicable)[1] if applicable else BASELINE

    # ---- invariants ----

    @invariant()
    def ledger_and_invoices_agree(self) -> None:
        async def check() -> None:
            async with self.database.unit_of_work(self.scope) as session:
                events = list((await session.execute(select(UsageEvent))).scalars())
                invoices = list((await session.execute(select(Invoice))).scalars())
                lines = list((await session.execute(select(InvoiceLine))).scalars())
            assert {e.event_id: e.chip_us for e in events} == self.receipts
            for event in events:
                if event.status == "rated":
                    assert event.price_per_chip_hour == self.expected_price(event.occurred_at)
            by_line: dict[str, int] = {}
            for event in events:
                if event.invoice_line_id is not None:
                    by_line[event.invoice_line_id] = by_line.get(event.invoice_line_id, 0) + event.chip_us
            assert {line.id: line.chip_us for line in lines} == {line.id: by_line.get(line.id, 0) for line in lines}
            assert set(by_line) <= {line.id for line in lines}
            billed = sum(line.chip_us for line in lines)
            unbilled = sum(e.chip_us for e in events if e.invoice_line_id is None)
            assert billed + unbilled == sum(self.receipts.values())
            for invoice in invoices:
                own = sorted(
                    (ln.position, ln.kind, ln.chip_us, ln.amount_minor) for ln in lines if ln.invoice_id == invoice.id
                )
                if invoice.status == "finalized":
                    assert invoice.total_minor == sum(amount for *_, amount in own)
                    snapshot = (invoice.total_minor, invoice.finalized_at, own)
                    assert self.snapshots.setdefault(invoice.id, snapshot) == snapshot
                else:
                    assert not own

        self.run(check())

    @invariant()
    def holds_and_spend_match_reservations(self) -> None:
        budget = self._budget()
        assert budget.reserved_micros >= 0
        assert budget.reserved_micros == sum(self.held.values())
        # The row holds the spend of the month it last saw: settles in that month, none from earlier ones.
        assert budget.spent_micros == self.spent_by_month.get(budget.period_start, 0)


def test_billing_state_machine(sqlite_template: Path, tmp_path: Path) -> None:
    class Machine(BillingMachine):
        template = sqlite_template
        workdir = tmp_path

    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=60,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
