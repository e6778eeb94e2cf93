"""Invoices and usage as CSV, and invoices as a printable HTML page."""

from __future__ import annotations

import calendar
import csv
import io
from collections.abc import Sequence
from html import escape

from switchyard.platform.billing.money import chip_hours
from switchyard.platform.billing.periods import period_label
from switchyard.platform.billing.schemas import InvoicePublic
from switchyard.platform.billing.usage import UsageBucket

__all__ = ["invoice_csv", "invoice_html", "usage_csv"]

_LINE_COLUMNS = [
    "kind",
    "description",
    "instance_type",
    "model",
    "usage_period",
    "chip_us",
    "quantity_chip_hours",
    "unit_price",
    "event_count",
    "input_tokens",
    "input_cached_tokens",
    "cache_saved_chip_us",
    "currency",
    "amount_minor",
    "amount",
]


def invoice_csv(invoice: InvoicePublic) -> str:
    """One row per line, then a total row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["invoice_id", "period", "status", *_LINE_COLUMNS])
    head = [invoice.id, period_label(invoice.period_start), invoice.status]
    for line in invoice.lines:
        writer.writerow(
            [
                *head,
                line.kind,
                line.description,
                line.instance_type,
                line.model,
                period_label(line.usage_period_start),
                line.chip_us,
                line.quantity_chip_hours,
                line.unit_price or "mixed",
                line.event_count,
                line.input_tokens,
                line.input_cached_tokens,
                line.cache_saved_chip_us,
                line.currency,
                line.amount_minor,
                line.amount,
            ]
        )
    blanks = [""] * (len(_LINE_COLUMNS) - 4)  # a total has a kind, a currency and an amount only
    writer.writerow([*head, "total", *blanks, invoice.currency, invoice.total_minor, invoice.total])
    return out.getvalue()


def invoice_html(invoice: InvoicePublic, tenant_id: str) -> str:
    """A self-contained page meant to be printed (or saved as PDF from the browser)."""
    rows = "\n".join(
        "<tr>"
        f"<td>{escape(line.description)}</td>"
        f"<td class=n>{line.input_tokens:,}</td><td class=n>{line.input_cached_tokens:,}</td>"
        f"<td class=n>{escape(line.quantity_chip_hours)}</td><td class=n>{chip_hours(line.cache_saved_chip_us)}</td>"
        f"<td class=n>{escape(line.unit_price or 'mixed')}</td>"
        f"<td class=n>{escape(line.amount)} {escape(line.currency)}</td>"
        "</tr>"
        for line in invoice.lines
    )
    status = "DRAFT (provisional)" if invoice.status == "draft" else "Finalized"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Invoice {escape(invoice.id)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #111; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ border-bottom: 1px solid #ccc; padding: .4rem; text-align: left; }}
td.n, th.n {{ text-align: right; font-variant-numeric: tabular-nums; }}
@media print {{ body {{ margin: 0; }} }}
</style></head><body>
<h1>Invoice {escape(invoice.id)}</h1>
<p>Tenant {escape(tenant_id)} &middot; period {escape(period_label(invoice.period_start))} (UTC) &middot; {status}</p>
<table>
<thead><tr><th>Item</th><th class=n>Input tokens</th><th class=n>Cached input tokens</th><th class=n>Chip-hours</th>
<th class=n>Chip-hours the cache saved</th><th class=n>Price per chip-hour</th><th class=n>Amount</th></tr></thead>
<tbody>
{rows}
</tbody>
<tfoot><tr><th colspan=6>Total</th><th class=n>{escape(invoice.total)} {escape(invoice.currency)}</th></tr></tfoot>
</table>
</body></html>
"""


def usage_csv(buckets: Sequence[UsageBucket], group_by: Sequence[str]) -> str:
    """One row per (bucket, group) with usage; empty buckets are left out."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "start_time",
            "end_time",
            *group_by,
            "chip_us",
            "input_tokens",
            "output_tokens",
            "num_model_requests",
            "input_cached_tokens",
            "cache_saved_chip_us",
        ]
    )
    for bucket in buckets:
        start = calendar.timegm(bucket.start.utctimetuple())
        end = calendar.timegm(bucket.end.utctimetuple())
        for row in bucket.rows:
            groups = [row.group.get(name) or "" for name in group_by]
            counts = [row.chip_us, row.input_tokens, row.output_tokens, row.num_model_requests]
            counts += [row.input_cached_tokens, row.cache_saved_chip_us]
            writer.writerow([start, end, *groups, *counts])
    return out.getvalue()
