"""Invoices: one per tenant and calendar month UTC, ``draft`` → ``finalized`` → never changed again.

A draft's lines are computed from the ledger whenever it is read. Finalizing (after a grace period, by the
``billing.finalize_invoices`` beat task) claims each usage event for exactly one line with a conditional
``UPDATE ... WHERE invoice_line_id IS NULL RETURNING``, computes the line from the rows it claimed, rounds it
once (half-up) and fixes the total. Events that arrive, or are rated, after their month was finalized are
still unbilled; they go on the tenant's next invoice as ``adjustment`` lines. Invoices of a tenant are
finalized in month order, and only the earliest draft carries adjustments.

Credits never make an invoice negative: the earliest draft applies the open credits, oldest first, each up to what
the invoice still adds up to in the credit's currency. Finalizing claims each credit it applies; a credit applied
in part leaves its unused remainder as a new open credit (``Unused remainder of <reason>``) for the next invoices,
so the credits granted always equal the credit lines applied plus the credits still open.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.money import cost_minor, format_minor
from switchyard.platform.billing.periods import month_start, next_month, period_label
from switchyard.platform.billing.rates import DEFAULT_CURRENCY
from switchyard.platform.billing.sql import insert_ignore
from switchyard.platform.billing.tx import own_transaction
from switchyard.platform.db import UNSCOPED, Database, new_id
from switchyard.platform.models import Credit, Invoice, InvoiceLine, UsageEvent, utc_now

__all__ = [
    "CREDIT_REMAINDER_PREFIX",
    "FINALIZE_GRACE",
    "LineDraft",
    "compute_lines",
    "ensure_drafts",
    "finalize_due",
    "finalize_invoice",
]

log = logging.getLogger(__name__)

FINALIZE_GRACE = timedelta(days=1)
"""How long after a month ends its invoice stays a draft, so late receipts of the month can still land on it."""
CREDIT_REMAINDER_PREFIX = "Unused remainder of "
"""The reason of the open credit that carries what an invoice could not use of a credit."""


@dataclass
class LineDraft:
    """A line as computed from the ledger (a draft's view, or a finalized line before it is stored)."""

    kind: str
    instance_type: str
    model: str
    usage_period_start: datetime
    currency: str
    chip_us: int = 0
    event_count: int = 0
    input_tokens: int = 0
    input_cached_tokens: int = 0
    """Of ``input_tokens``, those read from a replica's prefix cache (their cost is already in ``chip_us``)."""
    cache_saved_chip_us: int = 0
    """What computing those cached tokens would have cost beyond reading them (an estimate; not billed)."""
    priced: list[tuple[int, Decimal]] = field(default_factory=list)
    stored_amount_minor: int | None = None
    stored_unit_price: Decimal | None = None
    note: str = ""

    @property
    def amount_minor(self) -> int:
        """The stored amount of a finalized line; otherwise the exact cost rounded once, half-up."""
        if self.stored_amount_minor is not None:
            return self.stored_amount_minor
        return cost_minor(self.priced, self.currency)

    @property
    def unit_price(self) -> Decimal | None:
        """The price per chip-hour when the whole line had one rate; ``None`` when rates changed within it."""
        if self.stored_amount_minor is not None:
            return self.stored_unit_price
        prices = {price for _, price in self.priced}
        return prices.pop() if len(prices) == 1 else None

    @property
    def description(self) -> str:
        if self.kind == "credit":
            return f"Credit: {self.note}"
        what = f"{self.instance_type} compute for {self.model}"
        if self.kind == "adjustment":
            return f"Late usage from {period_label(self.usage_period_start)}: {what}"
        return what

    @property
    def key(self) -> tuple[str, datetime, str, str, str]:
        return (self.kind, self.usage_period_start, self.instance_type, self.model, self.currency)


async def ensure_drafts(session: AsyncSession, touched: Iterable[tuple[str, datetime]]) -> None:
    """Make sure a draft exists to receive rated usage of each (tenant, month): that month's, or, when it is
    already finalized, the tenant's next month that is not. Idempotent (insert-or-ignore)."""
    for tenant_id, period in sorted(set(touched)):
        finalized = set(
            (
                await session.execute(
                    select(col(Invoice.period_start)).where(
                        col(Invoice.tenant_id) == tenant_id,
                        col(Invoice.status) == "finalized",
                        col(Invoice.period_start) >= period,
                    )
                )
            ).scalars()
        )
        target = month_start(period)
        while target in finalized:
            target = next_month(target)
        row = {
            "id": new_id("inv"),
            "tenant_id": tenant_id,
            "period_start": target,
            "period_end": next_month(target),
            "status": "draft",
            "currency": DEFAULT_CURRENCY,
            "created_at": utc_now(),
        }
        await session.execute(insert_ignore(session, Invoice, ["tenant_id", "period_start"]).values([row]))


async def _earliest_draft(session: AsyncSession, tenant_id: str) -> datetime | None:
    statement = select(func.min(col(Invoice.period_start))).where(
        col(Invoice.tenant_id) == tenant_id, col(Invoice.status) == "draft"
    )
    return (await session.execute(statement)).scalar_one_or_none()


def _billable(invoice: Invoice, with_adjustments: bool) -> list[ColumnElement[bool]]:
    own = col(UsageEvent.period_start) == invoice.period_start
    conditions = [
        col(UsageEvent.tenant_id) == invoice.tenant_id,
        col(UsageEvent.status) == "rated",
        col(UsageEvent.invoice_line_id).is_(None),
    ]
    if with_adjustments:
        conditions.append(col(UsageEvent.period_start) <= invoice.period_start)
    else:
        conditions.append(own)
    return conditions


def _kind(invoice: Invoice, usage_period_start: datetime) -> str:
    return "usage" if usage_period_start == invoice.period_start else "adjustment"


async def compute_lines(session: AsyncSession, *, invoice: Invoice) -> list[LineDraft]:
    """The lines of an invoice: stored ones when finalized, else computed now from the unbilled ledger."""
    if invoice.status == "finalized":
        stored = (
            await session.execute(
                select(InvoiceLine).where(col(InvoiceLine.invoice_id) == invoice.id).order_by(col(InvoiceLine.position))
            )
        ).scalars()
        finalized = [(line.id, _from_stored(line)) for line in stored]
        await _count_stored_tokens(session, invoice, finalized)
        return [line for _, line in finalized]
    with_adjustments = await _earliest_draft(session, invoice.tenant_id) == invoice.period_start
    statement = (
        select(
            col(UsageEvent.period_start),
            col(UsageEvent.instance_type),
            col(UsageEvent.model),
            col(UsageEvent.currency),
            col(UsageEvent.price_per_chip_hour),
            func.sum(col(UsageEvent.chip_us)),
            func.count(),
            func.sum(col(UsageEvent.prompt_tokens)),
            func.sum(col(UsageEvent.cached_tokens)),
            func.sum(col(UsageEvent.cache_saved_chip_us)),
        )
        .where(*_billable(invoice, with_adjustments))
        .group_by(
            col(UsageEvent.period_start),
            col(UsageEvent.instance_type),
            col(UsageEvent.model),
            col(UsageEvent.currency),
            col(UsageEvent.price_per_chip_hour),
        )
    )
    lines: dict[tuple[str, datetime, str, str, str], LineDraft] = {}
    rows = await session.execute(statement)
    for period, instance_type, model, currency, price, chip_us, count, input_tokens, cached, saved in rows:
        # rating set both (_billable reads rated events)
        assert currency is not None
        assert price is not None
        draft = LineDraft(_kind(invoice, period), instance_type, model, period, currency)
        line = lines.setdefault(draft.key, draft)
        line.chip_us += int(chip_us)
        line.event_count += int(count)
        line.input_tokens += int(input_tokens)
        line.input_cached_tokens += int(cached)
        line.cache_saved_chip_us += int(saved)
        line.priced.append((int(chip_us), price))
    usage = sorted(lines.values(), key=_order_key)
    credits = await _open_credits(session, invoice.tenant_id) if with_adjustments else []
    return usage + [_credit_line(invoice, credit, applied) for credit, applied in _apply_credits(usage, credits)]


async def _open_credits(session: AsyncSession, tenant_id: str) -> list[Credit]:
    """Credits not yet on an invoice: the tenant's earliest draft shows them, finalizing claims them."""
    statement = (
        select(Credit)
        .where(col(Credit.tenant_id) == tenant_id, col(Credit.invoice_line_id).is_(None))
        .order_by(col(Credit.id))
    )
    return list((await session.execute(statement)).scalars())


def _apply_credits(usage: list[LineDraft], credits: list[Credit]) -> list[tuple[Credit, int]]:
    """Each credit that applies, with how much of it: oldest first, each up to what the usage lines still add up
    to in its currency (a credit in a currency the invoice has no usage in, or with nothing left to cover, waits)."""
    left: dict[str, int] = {}
    for line in usage:
        left[line.currency] = left.get(line.currency, 0) + line.amount_minor
    applied: list[tuple[Credit, int]] = []
    for credit in credits:
        amount = min(credit.amount_minor, left.get(credit.currency, 0))
        if amount > 0:
            left[credit.currency] -= amount
            applied.append((credit, amount))
    return applied


def _credit_line(invoice: Invoice, credit: Credit, applied_minor: int) -> LineDraft:
    note = credit.reason
    if applied_minor < credit.amount_minor:
        rest = format_minor(credit.amount_minor - applied_minor, credit.currency)
        whole = format_minor(credit.amount_minor, credit.currency)
        note += f" ({format_minor(applied_minor, credit.currency)} of {whole} {credit.currency}; {rest} left for later)"
    line = LineDraft("credit", "", "", invoice.period_start, credit.currency, note=note)
    line.stored_amount_minor = -applied_minor
    return line


def _remainder(credit: Credit, applied_minor: int) -> Credit:
    """The open credit that carries what an invoice did not use of ``credit``."""
    reason = CREDIT_REMAINDER_PREFIX + credit.reason.removeprefix(CREDIT_REMAINDER_PREFIX)
    return Credit(
        id=new_id("cred"),
        tenant_id=credit.tenant_id,
        amount_minor=credit.amount_minor - applied_minor,
        currency=credit.currency,
        reason=reason[:300],  # the column holds 300 characters
        granted_by=credit.granted_by,
    )


def _from_stored(line: InvoiceLine) -> LineDraft:
    note = line.description.removeprefix("Credit: ") if line.kind == "credit" else ""
    draft = LineDraft(line.kind, line.instance_type, line.model, line.usage_period_start, line.currency, note=note)
    draft.chip_us, draft.event_count = line.chip_us, line.event_count
    draft.stored_amount_minor, draft.stored_unit_price = line.amount_minor, line.unit_price
    return draft


async def _count_stored_tokens(session: AsyncSession, invoice: Invoice, lines: list[tuple[str, LineDraft]]) -> None:
    """A finalized line's tokens, from the events it billed (each carries the line's id, and never changes again)."""
    line_ids = [line_id for line_id, _ in lines]
    statement = (
        select(
            col(UsageEvent.invoice_line_id),
            func.sum(col(UsageEvent.prompt_tokens)),
            func.sum(col(UsageEvent.cached_tokens)),
            func.sum(col(UsageEvent.cache_saved_chip_us)),
        )
        .where(col(UsageEvent.tenant_id) == invoice.tenant_id, col(UsageEvent.invoice_line_id).in_(line_ids))
        .group_by(col(UsageEvent.invoice_line_id))
    )
    counted = {line_id: (int(a), int(b), int(c)) for line_id, a, b, c in await session.execute(statement)}
    for line_id, line in lines:
        line.input_tokens, line.input_cached_tokens, line.cache_saved_chip_us = counted.get(line_id, (0, 0, 0))


class FinalizeBlocked(RuntimeError):
    """The invoice cannot be finalized yet (an earlier month of the tenant is still a draft)."""


async def finalize_invoice(session: AsyncSession, *, invoice_id: str, now: datetime | None = None) -> bool:
    """Finalize one draft in the caller's transaction; ``False`` if it was already finalized (idempotent).

    The status flip is a conditional ``UPDATE`` done first, so a second finalizer waits on the row lock
    (PostgreSQL) or the write lock (SQLite) and then finds nothing to do.
    """
    now = now or utc_now()
    invoice = (
        await session.execute(
            select(Invoice).where(col(Invoice.id) == invoice_id).execution_options(populate_existing=True)
        )
    ).scalar_one()
    earliest = await _earliest_draft(session, invoice.tenant_id)
    if invoice.status == "draft" and earliest is not None and earliest < invoice.period_start:
        raise FinalizeBlocked(f"invoice {invoice.id}: {period_label(earliest)} must be finalized first")
    flipped = await session.execute(
        update(Invoice)
        .where(col(Invoice.id) == invoice.id, col(Invoice.status) == "draft")
        .values(status="finalized", finalized_at=now)
        .execution_options(synchronize_session=False)
    )
    if flipped.rowcount != 1:  # type: ignore[attr-defined]
        return False
    groups = await session.execute(
        select(
            col(UsageEvent.period_start), col(UsageEvent.instance_type), col(UsageEvent.model), col(UsageEvent.currency)
        )
        .where(*_billable(invoice, with_adjustments=True))
        .distinct()
    )
    lines: list[tuple[str, LineDraft]] = []
    for period, instance_type, model, currency in sorted(groups.all()):
        assert currency is not None  # rating set it (_billable reads rated events)
        line_id = new_id("il")
        claimed = await session.execute(
            update(UsageEvent)
            .where(
                *_billable(invoice, with_adjustments=True),
                col(UsageEvent.period_start) == period,
                col(UsageEvent.instance_type) == instance_type,
                col(UsageEvent.model) == model,
                col(UsageEvent.currency) == currency,
            )
            .values(invoice_line_id=line_id)
            .returning(
                col(UsageEvent.chip_us),
                col(UsageEvent.price_per_chip_hour),
                col(UsageEvent.prompt_tokens),
                col(UsageEvent.cached_tokens),
                col(UsageEvent.cache_saved_chip_us),
            )
            .execution_options(synchronize_session=False)
        )
        draft = LineDraft(_kind(invoice, period), instance_type, model, period, currency)
        for chip_us, price, input_tokens, cached, saved in claimed.all():
            assert price is not None  # rating set it
            draft.chip_us += int(chip_us)
            draft.event_count += 1
            draft.input_tokens += int(input_tokens)
            draft.input_cached_tokens += int(cached)
            draft.cache_saved_chip_us += int(saved)
            draft.priced.append((int(chip_us), price))
        if draft.event_count:
            lines.append((line_id, draft))
    usage = [draft for _, draft in lines]
    for credit, applied in _apply_credits(usage, await _open_credits(session, invoice.tenant_id)):
        line_id = new_id("il")
        claimed = await session.execute(
            update(Credit)
            .where(col(Credit.id) == credit.id, col(Credit.invoice_line_id).is_(None))
            .values(invoice_line_id=line_id)
            .execution_options(synchronize_session=False)
        )
        if claimed.rowcount == 1:  # type: ignore[attr-defined]
            lines.append((line_id, _credit_line(invoice, credit, applied)))
            if applied < credit.amount_minor:
                session.add(_remainder(credit, applied))
    currencies = {draft.currency for _, draft in lines}
    if len(currencies) > 1:
        raise ValueError(f"invoice {invoice.id} mixes currencies {sorted(currencies)}: check the rate cards")
    total = 0
    for position, (line_id, draft) in enumerate(sorted(lines, key=lambda item: _order_key(item[1]))):
        amount = draft.amount_minor
        total += amount
        session.add(
            InvoiceLine(
                id=line_id,
                tenant_id=invoice.tenant_id,
                invoice_id=invoice.id,
                position=position,
                kind=draft.kind,
                instance_type=draft.instance_type,
                model=draft.model,
                usage_period_start=draft.usage_period_start,
                chip_us=draft.chip_us,
                event_count=draft.event_count,
                unit_price=draft.unit_price,
                currency=draft.currency,
                amount_minor=amount,
                description=draft.description,
            )
        )
    await session.flush()
    await session.execute(
        update(Invoice)
        .where(col(Invoice.id) == invoice.id)
        .values(total_minor=total, currency=currencies.pop() if currencies else invoice.currency)
        .execution_options(synchronize_session=False)
    )
    return True


def _order_key(line: LineDraft) -> tuple[int, datetime, str, str]:
    rank = {"usage": 0, "adjustment": 1}.get(line.kind, 2)  # credits last
    return (rank, line.usage_period_start, line.instance_type, line.model)


async def finalize_due(
    database: Database, *, now: datetime | None = None, grace: timedelta = FINALIZE_GRACE
) -> list[str]:
    """Finalize every draft whose month ended at least ``grace`` ago, each in its own transaction, oldest
    first per tenant; returns the ids finalized. Safe to run concurrently and repeatedly. An invoice that
    fails (logged) stays a draft, with its tenant's later months, and is retried on the next run."""
    now = now or utc_now()
    async with database.unit_of_work(UNSCOPED) as session:
        unbilled = await session.execute(
            select(col(UsageEvent.tenant_id), col(UsageEvent.period_start))
            .where(col(UsageEvent.status) == "rated", col(UsageEvent.invoice_line_id).is_(None))
            .distinct()
        )
        await ensure_drafts(session, [(tenant, period) for tenant, period in unbilled.all()])
    async with database.unit_of_work(UNSCOPED) as session:
        due = (
            await session.execute(
                select(col(Invoice.id), col(Invoice.tenant_id), col(Invoice.period_end))
                .where(col(Invoice.status) == "draft")
                .order_by(col(Invoice.tenant_id), col(Invoice.period_start))
            )
        ).all()
    finalized: list[str] = []
    blocked: set[str] = set()
    for invoice_id, tenant_id, period_end in due:
        if period_end + grace > now or tenant_id in blocked:
            blocked.add(tenant_id)  # later months of this tenant wait for this one
            continue
        try:
            async with own_transaction(database, UNSCOPED) as session:
                if await finalize_invoice(session, invoice_id=invoice_id, now=now):
                    finalized.append(invoice_id)
        except Exception:  # one bad invoice (e.g. mixed currencies) must not hold up every other tenant's
            log.exception("invoice %s could not be finalized; it stays a draft", invoice_id)
            blocked.add(tenant_id)
    return finalized
