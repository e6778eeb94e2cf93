"""Cached input tokens on invoices: each line of a draft and of a finalized invoice counts the input tokens of the
requests it bills, those read from a prefix cache and the chip-time they saved, the same in JSON, CSV and the
printable HTML page."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from switchyard.platform.billing.invoices import finalize_due
from switchyard.platform.db import TenantScope
from tests.platform.billing.factories import rated_usage, receipt

NOV = datetime(2026, 11, 1, tzinfo=UTC)


async def _bill_november(client: Any, tenant: Any) -> None:
    await rated_usage(
        client.app.state.database,
        TenantScope(tenant.id),
        receipt(
            chip_us=3_600_000_000,
            occurred_at=NOV + timedelta(days=1),
            prompt_tokens=4_000,
            cached_tokens=3_584,
            cache_saved_chip_us=720_000_000,
        ),
        receipt(chip_us=1_800_000_000, occurred_at=NOV + timedelta(days=2), prompt_tokens=4_100, cached_tokens=0),
        receipt(chip_us=900_000_000, occurred_at=NOV + timedelta(days=3), model="other", prompt_tokens=700),
    )


def _counts(invoice: dict[str, Any]) -> list[tuple[str, int, int, int]]:
    lines = invoice["lines"]
    return [(ln["model"], ln["input_tokens"], ln["input_cached_tokens"], ln["cache_saved_chip_us"]) for ln in lines]


async def test_a_draft_invoice_line_counts_its_cached_input_tokens(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    await _bill_november(client, tenant)

    (draft,) = (await client.get("/v1/invoices", headers=tenant.headers("admin"))).json()["data"]

    assert draft["status"] == "draft"
    assert _counts(draft) == [("llama-3.1-8b", 8_100, 3_584, 720_000_000), ("other", 700, 0, 0)]


async def test_a_finalized_invoice_shows_cached_input_tokens_in_json_csv_and_html(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    await _bill_november(client, tenant)
    await finalize_due(client.app.state.database, now=datetime(2026, 12, 5, tzinfo=UTC))

    (invoice,) = (await client.get("/v1/invoices", headers=tenant.headers("admin"))).json()["data"]
    assert invoice["status"] == "finalized"
    assert _counts(invoice) == [("llama-3.1-8b", 8_100, 3_584, 720_000_000), ("other", 700, 0, 0)]

    as_csv = await client.get(f"/v1/invoices/{invoice['id']}?format=csv", headers=tenant.headers())
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    columns = ("kind", "model", "input_tokens", "input_cached_tokens", "cache_saved_chip_us")
    assert [tuple(r[c] for c in columns) for r in rows] == [
        ("usage", "llama-3.1-8b", "8100", "3584", "720000000"),
        ("usage", "other", "700", "0", "0"),
        ("total", "", "", "", ""),
    ]
    assert rows[-1]["amount"] == invoice["total"]  # the total row still ends with the total

    as_html = (await client.get(f"/v1/invoices/{invoice['id']}?format=html", headers=tenant.headers())).text
    assert "<th class=n>Input tokens</th><th class=n>Cached input tokens</th>" in as_html
    (llama,) = re.findall(r"<tr><td>trn2\.48xlarge compute for llama-3\.1-8b</td>(.*?)</tr>", as_html)
    assert re.findall(r"<td class=n>([^<]*)</td>", llama)[:2] == ["8,100", "3,584"]
    assert "<th class=n>Chip-hours the cache saved</th>" in as_html
    assert re.findall(r"<td class=n>([^<]*)</td>", llama)[3] == "0.200000000"  # 720,000,000 chip-µs
