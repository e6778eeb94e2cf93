"""Usage: the tenant's compute over a chosen range of UTC days, by agent, workflow, API key or model, in chip-time
and (for admins, who see invoices) in money as ``billing.costs`` prices it; a chart of the days stacked by group,
and a table. Input tokens read from a replica's prefix cache are shown beside the input tokens, with the share of
the input they were and the chip-time they saved (the fleet's estimate). A range with no usage says how to start
(``quickstart.html``).

A thin layer over ``billing.usage`` (what ``/v1/usage`` reads); names come from the registries, ids stay for what
has none (a deleted agent, a revoked key).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from litestar import Controller, Request, Response, get
from litestar.params import FromQuery

from switchyard.platform.agent_registry.service import list_agents
from switchyard.platform.api_keys.service import list_keys
from switchyard.platform.auth.roles import Role
from switchyard.platform.billing.money import currency_exponent
from switchyard.platform.billing.periods import month_start
from switchyard.platform.billing.usage import UsageBucket, UsageRow, read_usage, totals
from switchyard.platform.console.edge import console_access, console_user
from switchyard.platform.console.render import render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.models import utc_now
from switchyard.platform.workflows.service import list_workflows

if TYPE_CHECKING:  # a type only: pages issue no SQL (the services they call do)
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["GROUPS", "RANGES", "UsagePagesController", "cache_share", "money", "usage_chart"]

RANGES = {"month": "This month", "last_month": "Last month", "7d": "Last 7 days", "30d": "Last 30 days"}
GROUPS = {"agent_id": "Agent", "workflow_id": "Workflow", "api_key_id": "API key", "model": "Model"}
MAX_DAYS = 366
MAX_SERIES = 8
"""The chart stacks the largest groups; the rest are one band, ``others``."""
_CHIP_US_PER_HOUR = 3_600_000_000
_ALL = CursorParams(limit=100, after=None, before=None, order="desc")


@dataclass(frozen=True, slots=True)
class Window:
    start: datetime
    end: datetime
    label: str
    error: str | None = None


def window(chosen: str, first: str | None, last: str | None, now: datetime) -> Window:
    """The UTC days to show: a named range, or ``first``..``last`` (dates, inclusive); a bad choice is this month,
    with the reason."""
    today = datetime.combine(now.astimezone(UTC).date(), datetime.min.time(), UTC)
    tomorrow = today + timedelta(days=1)
    if first or last:
        try:
            start_day, end_day = date.fromisoformat(first or ""), date.fromisoformat(last or "")
        except ValueError:
            error = "dates are YYYY-MM-DD, both of them"
        else:
            days = (end_day - start_day).days + 1
            if 1 <= days <= MAX_DAYS:
                start = datetime.combine(start_day, datetime.min.time(), UTC)
                return Window(start, start + timedelta(days=days), f"{start_day} to {end_day}")
            error = f"the first day comes before the last, at most {MAX_DAYS} days apart"
        return Window(month_start(now), tomorrow, RANGES["month"], error)
    if chosen == "last_month":
        end = month_start(now)
        return Window(month_start(end - timedelta(days=1)), end, RANGES[chosen])
    if chosen in ("7d", "30d"):
        return Window(tomorrow - timedelta(days=int(chosen[:-1])), tomorrow, RANGES[chosen])
    return Window(month_start(now), tomorrow, RANGES["month"])


def money(cost_micros: dict[str, int]) -> str:
    """Micro-units by currency as the currencies show them: ``{"USD": 1_468_125}`` → ``"1.47 USD"``."""
    parts = []
    for currency, micros in sorted(cost_micros.items()):
        places = currency_exponent(currency)
        parts.append(f"{micros / 1_000_000:,.{places}f} {currency}")
    return " + ".join(parts) or "—"


def cache_share(usage: UsageRow) -> str:
    """The share of the input tokens read from a prefix cache, to a tenth of a percent: ``"93.4 %"``; ``"—"``
    when there was no input."""
    if not usage.input_tokens:
        return "—"
    return f"{100 * usage.input_cached_tokens / usage.input_tokens:.1f} %"


def usage_chart(buckets: list[UsageBucket], group: str, names: dict[str, str]) -> dict[str, Any]:
    """Days, one series per group (the ``MAX_SERIES`` largest, the rest as ``others``), chip-hours a day."""
    sums = totals(buckets)
    ranked = sorted(sums, key=lambda key: -sums[key].chip_us)
    shown = [key[0] for key in ranked[:MAX_SERIES]]
    labels = [names.get(str(value), str(value)) if value else "(none)" for value in shown]
    others = len(ranked) > MAX_SERIES
    values = [[0.0] * len(buckets) for _ in range(len(shown) + others)]
    for i, bucket in enumerate(buckets):
        for row in bucket.rows:
            value = row.group.get(group)
            line = shown.index(value) if value in shown else len(shown)
            values[line][i] += row.chip_us / _CHIP_US_PER_HOUR
    return {
        "days": [bucket.start.date().isoformat() for bucket in buckets],
        "series": labels + (["others"] if others else []),
        "values": values,
        "totals": [sum(line[i] for line in values) for i in range(len(buckets))],
        "unit": "chip-hours",
    }


async def names_of(session: AsyncSession, scope: TenantScope, group: str) -> dict[str, str]:
    """Display names of the group's ids (models are their own names)."""
    if group == "agent_id":
        return {a.id: a.name for a in (await list_agents(session, scope=scope, params=_ALL)).data}
    if group == "workflow_id":
        return {w.id: w.name for w in (await list_workflows(session, scope=scope, params=_ALL)).data}
    if group == "api_key_id":
        keys = (await list_keys(session, scope=scope, params=_ALL)).data
        return {k.id: k.name or k.redacted_value for k in keys}
    return {}


def _rows(sums: dict[tuple[str | None, ...], UsageRow], group: str, names: dict[str, str]) -> list[dict[str, Any]]:
    """The table's rows, largest first: the group's id and its name (a model is its own name)."""
    rows = []
    for row in sorted(sums.values(), key=lambda row: -row.chip_us):
        value = row.group.get(group)
        name = value if group == "model" else names.get(str(value), "")
        rows.append(
            {"id": value, "name": name, "usage": row, "money": money(row.cost_micros), "cache_share": cache_share(row)}
        )
    return rows


class UsagePagesController(Controller):
    path = "/usage"

    @get("/", opt=console_access(Role.VIEWER))
    async def usage(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        since: FromQuery[str] = "month",
        group: FromQuery[str] = "agent_id",
        first: FromQuery[str | None] = None,
        last: FromQuery[str | None] = None,
    ) -> Response[str]:
        user = console_user(request)
        shown = window(since, first, last, utc_now())
        group = group if group in GROUPS else "agent_id"
        buckets = await read_usage(
            db_session,
            scope=user.scope,
            start=shown.start,
            end=shown.end,
            width="1d",
            group_by=(group,),
            priced=user.role.includes(Role.ADMIN),
        )
        names = await names_of(db_session, user.scope, group)
        sums = totals(buckets)
        total = totals(buckets, ()).get(())
        return render(
            request,
            "usage.html",
            status_code=400 if shown.error else 200,
            window=shown,
            last_day=(shown.end - timedelta(days=1)).date(),
            chosen={"since": since, "group": group, "first": first or "", "last": last or ""},
            ranges=RANGES,
            groups=GROUPS,
            rows=_rows(sums, group, names),
            total=total,
            total_money=money(total.cost_micros) if total else "—",
            total_cache_share=cache_share(total) if total else "—",
            show_money=user.role.includes(Role.ADMIN),
            chart=usage_chart(buckets, group, names),
            base_url=str(request.base_url).rstrip("/") + "/v1",
        )
