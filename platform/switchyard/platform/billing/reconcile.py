"""Reconciliation of one month: compute attributed = compute used, every event billed once, totals = lines.

Checks (each a list of discrepancies; the report is clean when all are empty):
1. compute: per instance type, the busy chip-µs the replicas recorded == the chip-µs of the receipts they issued
   (their engines split busy time exactly); and per request, its usage event == its receipts. A receipt no usage
   event accounts for is compute that never reached the books (its gateway died, or its commit failed): named,
   not billed, not a discrepancy. Usage with no receipt behind it is a discrepancy: this check is never skipped;
2. every usage event of the month is unpriced-free and either on exactly one line of a finalized invoice
   or unbilled, and every line's ``chip_us``/``event_count`` equals the sum of the events linked to it;
3. every finalized invoice's total equals the sum of its lines' amounts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.periods import next_month, period_label
from switchyard.platform.models import FleetBusy, FleetReceipt, Invoice, InvoiceLine, UsageEvent

__all__ = ["ReconciliationReport", "reconcile"]


MAX_NAMED = 20
"""Lost requests named one by one in the rendered report (all of them are in ``lost``)."""


@dataclass(frozen=True)
class LostCompute:
    """Compute a request used that no usage event accounts for."""

    tenant_id: str
    request_id: str
    instance_type: str
    replica: str
    chip_us: int
    finished_at: datetime


@dataclass
class ReconciliationReport:
    period_start: datetime
    attributed_chip_us: dict[str, int] = field(default_factory=dict)
    fleet_busy_chip_us: dict[str, int] = field(default_factory=dict)
    receipted_chip_us: dict[str, int] = field(default_factory=dict)
    lost: list[LostCompute] = field(default_factory=list)
    events: int = 0
    events_by_status: dict[str, int] = field(default_factory=dict)
    billed_events: int = 0
    """Events on a line of a finalized invoice."""
    unbilled_events: int = 0
    """Events on no invoice line yet: rated ones wait for their month's invoices to be finalized."""
    invoices_checked: int = 0
    discrepancies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.discrepancies

    @property
    def compute_checked(self) -> bool:
        """Whether any compute was recorded or billed this month (the compute check ran on something)."""
        return bool(self.attributed_chip_us or self.fleet_busy_chip_us or self.receipted_chip_us)

    @property
    def status_summary(self) -> str:
        """How many events are rated, then how many are in each other status (``8 rated`` or ``0 rated, 4 pending``)."""
        others = sorted((status, count) for status, count in self.events_by_status.items() if status != "rated")
        return ", ".join([f"{self.events_by_status.get('rated', 0)} rated", *(f"{n} {status}" for status, n in others)])

    def render(self) -> str:
        """A plain-text report for the terminal."""
        lines = [f"Reconciliation of {period_label(self.period_start)} (UTC)"]
        lines.append(
            f"  usage events: {self.events} ({self.status_summary}); {self.billed_events} on finalized invoices, "
            f"{self.unbilled_events} not invoiced yet"
        )
        lost_by_instance: dict[str, int] = {}
        for item in self.lost:
            lost_by_instance[item.instance_type] = lost_by_instance.get(item.instance_type, 0) + item.chip_us
        for instance in sorted(set(self.attributed_chip_us) | set(self.fleet_busy_chip_us)):
            attributed = self.attributed_chip_us.get(instance, 0)
            busy = self.fleet_busy_chip_us.get(instance)
            shown = "not recorded" if busy is None else f"{busy:,}"
            lost = lost_by_instance.get(instance, 0)
            lost_shown = f", of which {lost:,} never reached the books" if lost else ""
            lines.append(f"  {instance}: attributed {attributed:,} chip-us, fleet busy {shown}{lost_shown}")
        if not self.compute_checked:
            lines.append("  compute: no usage, busy time or receipts this month")
        for item in self.lost[:MAX_NAMED]:
            lines.append(
                f"  not billed: {item.chip_us:,} chip-us of {item.request_id} (tenant {item.tenant_id}) on "
                f"{item.replica} at {item.finished_at:%Y-%m-%d %H:%M:%S} UTC: its gateway died or its usage never "
                "committed"
            )
        if len(self.lost) > MAX_NAMED:
            lines.append(f"  not billed: {len(self.lost) - MAX_NAMED} more requests (ReconciliationReport.lost)")
        lines.append(f"  finalized invoices checked: {self.invoices_checked}")
        if self.ok:
            lines.append("  OK: no discrepancies")
        else:
            lines.append(f"  {len(self.discrepancies)} DISCREPANCIES:")
            lines.extend(f"    - {item}" for item in self.discrepancies)
        return "\n".join(lines)


async def reconcile(session: AsyncSession, *, period_start: datetime) -> ReconciliationReport:
    """Check one month across all tenants (an operator job: ``session`` must be unscoped)."""
    report = ReconciliationReport(period_start)
    end = next_month(period_start)
    in_month = (col(UsageEvent.occurred_at) >= period_start, col(UsageEvent.occurred_at) < end)
    await _check_compute(session, report, period_start, end)
    status_counts = await session.execute(
        select(col(UsageEvent.status), func.count(), func.count(col(UsageEvent.invoice_line_id)))
        .where(*in_month)
        .group_by(col(UsageEvent.status))
    )
    for status, count, billed in status_counts.all():
        report.events += int(count)
        report.events_by_status[status] = int(count)
        report.billed_events += int(billed)
        if status != "rated":
            report.discrepancies.append(f"{count} usage events are {status}, not rated")
        if status != "rated" and billed:
            report.discrepancies.append(f"{billed} {status} usage events are on invoice lines")
    report.unbilled_events = report.events - report.billed_events

    dangling = await session.execute(
        select(func.count())
        .select_from(UsageEvent)
        .outerjoin(InvoiceLine, col(InvoiceLine.id) == col(UsageEvent.invoice_line_id))
        .where(*in_month, col(UsageEvent.invoice_line_id).is_not(None), col(InvoiceLine.id).is_(None))
    )
    if missing := int(dangling.scalar_one()):
        report.discrepancies.append(f"{missing} usage events point at invoice lines that do not exist")

    linked = (
        select(
            col(UsageEvent.invoice_line_id).label("line_id"),
            func.sum(col(UsageEvent.chip_us)).label("chip_us"),
            func.count().label("events"),
        )
        .where(col(UsageEvent.invoice_line_id).is_not(None))
        .group_by(col(UsageEvent.invoice_line_id))
        .subquery()
    )
    lines = await session.execute(
        select(
            col(InvoiceLine.id),
            col(InvoiceLine.chip_us),
            col(InvoiceLine.event_count),
            linked.c.chip_us,
            linked.c.events,
        )
        .outerjoin(linked, linked.c.line_id == col(InvoiceLine.id))
        .where(col(InvoiceLine.usage_period_start) == period_start)
    )
    for line_id, chip_us, event_count, linked_chip_us, linked_events in lines.all():
        if (chip_us, event_count) != (int(linked_chip_us or 0), int(linked_events or 0)):
            report.discrepancies.append(
                f"line {line_id}: {chip_us} chip-us over {event_count} events, but its events sum to "
                f"{int(linked_chip_us or 0)} chip-us over {int(linked_events or 0)}"
            )

    sums = (
        select(col(InvoiceLine.invoice_id).label("invoice_id"), func.sum(col(InvoiceLine.amount_minor)).label("amount"))
        .group_by(col(InvoiceLine.invoice_id))
        .subquery()
    )
    invoices = await session.execute(
        select(col(Invoice.id), col(Invoice.total_minor), sums.c.amount)
        .outerjoin(sums, sums.c.invoice_id == col(Invoice.id))
        .where(col(Invoice.status) == "finalized", col(Invoice.period_start) == period_start)
    )
    for invoice_id, total, amount in invoices.all():
        report.invoices_checked += 1
        if total != int(amount or 0):
            report.discrepancies.append(f"invoice {invoice_id}: total {total} != sum of lines {int(amount or 0)}")
    return report


async def _totals(session: AsyncSession, instance: Any, chip_us: Any, *where: Any) -> dict[str, int]:
    rows = await session.execute(select(instance, func.sum(chip_us)).where(*where).group_by(instance))
    return {name: int(total) for name, total in rows.all()}


async def _check_compute(session: AsyncSession, report: ReconciliationReport, start: datetime, end: datetime) -> None:
    """Busy time == receipts per instance type; each request's receipts == its usage event (lost ones named)."""
    usage_in_month = (col(UsageEvent.occurred_at) >= start, col(UsageEvent.occurred_at) < end)
    receipts_in_month = (col(FleetReceipt.finished_at) >= start, col(FleetReceipt.finished_at) < end)
    report.attributed_chip_us = await _totals(
        session, col(UsageEvent.instance_type), col(UsageEvent.chip_us), *usage_in_month
    )
    report.fleet_busy_chip_us = await _totals(
        session,
        col(FleetBusy.instance_type),
        col(FleetBusy.chip_us),
        col(FleetBusy.period_start) >= start,
        col(FleetBusy.period_start) < end,
    )
    report.receipted_chip_us = await _totals(
        session, col(FleetReceipt.instance_type), col(FleetReceipt.chip_us), *receipts_in_month
    )
    for instance in sorted(set(report.fleet_busy_chip_us) | set(report.receipted_chip_us)):
        busy, receipted = report.fleet_busy_chip_us.get(instance, 0), report.receipted_chip_us.get(instance, 0)
        if busy != receipted:
            report.discrepancies.append(
                f"{instance}: the replicas recorded {busy} busy chip-us but issued receipts for {receipted} "
                f"({receipted - busy:+d}): compute in flight lost with a process that ran replicas, or a recording gap"
            )

    receipts = (
        select(
            col(FleetReceipt.tenant_id).label("tenant_id"),
            col(FleetReceipt.request_id).label("request_id"),
            col(FleetReceipt.instance_type).label("instance_type"),
            func.min(col(FleetReceipt.replica)).label("replica"),
            func.max(col(FleetReceipt.finished_at)).label("finished_at"),
            func.sum(col(FleetReceipt.chip_us)).label("chip_us"),
        )
        .where(*receipts_in_month)
        .group_by(col(FleetReceipt.tenant_id), col(FleetReceipt.request_id), col(FleetReceipt.instance_type))
        .subquery()
    )
    usage = (
        select(
            col(UsageEvent.tenant_id).label("tenant_id"),
            col(UsageEvent.event_id).label("event_id"),
            col(UsageEvent.instance_type).label("instance_type"),
            func.sum(col(UsageEvent.chip_us)).label("chip_us"),
        )
        .where(*usage_in_month)
        .group_by(col(UsageEvent.tenant_id), col(UsageEvent.event_id), col(UsageEvent.instance_type))
        .subquery()
    )
    matched = and_(receipts.c.tenant_id == usage.c.tenant_id, receipts.c.request_id == usage.c.event_id)
    lost = await session.execute(
        select(receipts, func.coalesce(usage.c.chip_us, 0))
        .select_from(receipts.outerjoin(usage, matched))
        .where(func.coalesce(usage.c.chip_us, 0) < receipts.c.chip_us)
        .order_by(receipts.c.finished_at, receipts.c.request_id)
    )
    for tenant_id, request_id, instance_type, replica, finished_at, chip_us, billed in lost.all():
        report.lost.append(
            LostCompute(tenant_id, request_id, instance_type, replica, int(chip_us) - int(billed), finished_at)
        )
    over = await session.execute(
        select(usage, func.coalesce(receipts.c.chip_us, 0))
        .select_from(usage.outerjoin(receipts, matched))
        .where(func.coalesce(receipts.c.chip_us, 0) < usage.c.chip_us)
        .order_by(usage.c.event_id)
        .limit(MAX_NAMED + 1)
    )
    rows = over.all()
    for tenant_id, event_id, instance_type, billed, receipted in rows[:MAX_NAMED]:
        report.discrepancies.append(
            f"{instance_type}: usage event {event_id} (tenant {tenant_id}) bills {int(billed)} chip-us but its "
            f"receipts add up to {int(receipted)} (no receipt: was it metered by a process that records none?)"
        )
    if len(rows) > MAX_NAMED:
        report.discrepancies.append("... more usage events bill compute no receipt accounts for")
