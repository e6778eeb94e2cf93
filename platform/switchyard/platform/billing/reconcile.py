"""Reconciliation of one month: compute attributed = compute used, every event billed once, totals = lines.

Checks (each a list of discrepancies; the report is clean when all are empty):
1. attributed chip-µs of the month's usage events == busy chip-µs the fleet recorded for the month less the
   compute whose receipt never reached a gateway (named, with its minutes), per instance type; usage with no
   busy time recorded at all is a discrepancy, never a skipped check;
2. every usage event of the month is unpriced-free and either on exactly one line of a finalized invoice
   or unbilled, and every line's ``chip_us``/``event_count`` equals the sum of the events linked to it;
3. every finalized invoice's total equals the sum of its lines' amounts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.periods import next_month, period_label
from switchyard.platform.models import FleetBusy, Invoice, InvoiceLine, UsageEvent

__all__ = ["ReconciliationReport", "reconcile"]


@dataclass
class ReconciliationReport:
    period_start: datetime
    attributed_chip_us: dict[str, int] = field(default_factory=dict)
    fleet_busy_chip_us: dict[str, int] = field(default_factory=dict)
    undelivered_chip_us: dict[str, int] = field(default_factory=dict)
    undelivered_minutes: list[tuple[datetime, str, int]] = field(default_factory=list)
    events: int = 0
    billed_events: int = 0
    unbilled_events: int = 0
    invoices_checked: int = 0
    discrepancies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.discrepancies

    def render(self) -> str:
        """A plain-text report for the terminal."""
        lines = [f"Reconciliation of {period_label(self.period_start)} (UTC)"]
        lines.append(f"  usage events: {self.events} ({self.billed_events} billed, {self.unbilled_events} unbilled)")
        for instance in sorted(set(self.attributed_chip_us) | set(self.fleet_busy_chip_us)):
            attributed = self.attributed_chip_us.get(instance, 0)
            busy = self.fleet_busy_chip_us.get(instance)
            shown = "not recorded" if busy is None else f"{busy:,}"
            lost = self.undelivered_chip_us.get(instance, 0)
            lost_shown = f", of which {lost:,} never delivered to a gateway" if lost else ""
            lines.append(f"  {instance}: attributed {attributed:,} chip-us, fleet busy {shown}{lost_shown}")
        if not self.attributed_chip_us and not self.fleet_busy_chip_us:
            lines.append("  compute: no usage and no fleet busy time this month")
        for minute, replica, chip_us in self.undelivered_minutes:
            lines.append(
                f"  not billed: {chip_us:,} chip-us on {replica} in the minute from {minute:%Y-%m-%d %H:%M} UTC "
                "(requests whose API process or worker died before their receipt arrived)"
            )
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
    attributed = await session.execute(
        select(col(UsageEvent.instance_type), func.sum(col(UsageEvent.chip_us)))
        .where(*in_month)
        .group_by(col(UsageEvent.instance_type))
    )
    report.attributed_chip_us = {name: int(total) for name, total in attributed.all()}
    busy = await session.execute(
        select(
            col(FleetBusy.instance_type), func.sum(col(FleetBusy.chip_us)), func.sum(col(FleetBusy.undelivered_chip_us))
        )
        .where(col(FleetBusy.period_start) >= period_start, col(FleetBusy.period_start) < end)
        .group_by(col(FleetBusy.instance_type))
    )
    for name, total, undelivered in busy.all():
        report.fleet_busy_chip_us[name] = int(total)
        if undelivered:
            report.undelivered_chip_us[name] = int(undelivered)
    lost = await session.execute(
        select(col(FleetBusy.period_start), col(FleetBusy.replica), col(FleetBusy.undelivered_chip_us))
        .where(
            col(FleetBusy.period_start) >= period_start,
            col(FleetBusy.period_start) < end,
            col(FleetBusy.undelivered_chip_us) > 0,
        )
        .order_by(col(FleetBusy.period_start), col(FleetBusy.replica))
    )
    report.undelivered_minutes = [(minute, replica, int(chip_us)) for minute, replica, chip_us in lost.all()]
    for instance in sorted(set(report.attributed_chip_us) | set(report.fleet_busy_chip_us)):
        used = report.attributed_chip_us.get(instance, 0)
        if instance not in report.fleet_busy_chip_us:
            if not used:
                continue
            report.discrepancies.append(
                f"{instance}: {used} chip-us attributed but no fleet busy time recorded (is every process that "
                "runs replicas, the fleet process included, writing to this database?)"
            )
            continue
        recorded = report.fleet_busy_chip_us[instance] - report.undelivered_chip_us.get(instance, 0)
        if used != recorded:
            report.discrepancies.append(
                f"{instance}: attributed {used} chip-us but the fleet recorded {recorded} busy chip-us "
                f"({used - recorded:+d} chip-us)"
            )

    status_counts = await session.execute(
        select(col(UsageEvent.status), func.count(), func.count(col(UsageEvent.invoice_line_id)))
        .where(*in_month)
        .group_by(col(UsageEvent.status))
    )
    for status, count, billed in status_counts.all():
        report.events += int(count)
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
