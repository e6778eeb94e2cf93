"""The overview: compute this month against the budgets, usage by day, recent runs."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from litestar import Controller, Request, Response, get

from switchyard.platform.auth.roles import Role
from switchyard.platform.billing.money import currency_exponent
from switchyard.platform.billing.periods import month_start
from switchyard.platform.billing.service import list_budgets, usage_buckets
from switchyard.platform.billing.usage import UsageBucket
from switchyard.platform.console.edge import console_access, console_user
from switchyard.platform.console.queries import count_runs_since, recent_runs
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.models import utc_now

__all__ = ["OverviewController", "usage_chart"]

_CHIP_US_PER_HOUR = 3_600_000_000


def usage_chart(buckets: list[UsageBucket]) -> dict[str, Any]:
    """Days, one series per model (chip-hours a day) and the day totals, for the chart and its table."""
    models = sorted({str(row.group.get("model")) for bucket in buckets for row in bucket.rows})
    values = [[0.0] * len(buckets) for _ in models]
    totals = [0] * len(buckets)
    for i, bucket in enumerate(buckets):
        for row in bucket.rows:
            values[models.index(str(row.group.get("model")))][i] += row.chip_us / _CHIP_US_PER_HOUR
            totals[i] += row.chip_us
    return {
        "days": [bucket.start.date().isoformat() for bucket in buckets],
        "series": models,
        "chip_hours": values,
        "totals": totals,
    }


def _budget_view(budget: Any) -> dict[str, Any]:
    limit = Decimal(budget.limit_minor).scaleb(-currency_exponent(budget.currency))
    spent = Decimal(budget.spent)
    percent = int(min(Decimal(100), spent * 100 / limit)) if limit > 0 else 100
    return {
        "scope": budget.scope,
        "scope_id": budget.scope_id,
        "currency": budget.currency,
        "limit": f"{limit:,.{currency_exponent(budget.currency)}f}",
        "spent": f"{spent:,.{currency_exponent(budget.currency)}f}",
        "hard": budget.hard,
        "percent": percent,
        "alerts_fired": budget.alerts_fired,
    }


class OverviewController(Controller):
    path = "/"

    @get("/", opt=console_access(Role.VIEWER))
    async def overview(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        scope = console_user(request).scope
        start = month_start(utc_now())
        buckets = await usage_buckets(
            db_session, scope=scope, start_time=None, end_time=None, width="1d", group_by=["model"]
        )
        user = console_user(request)
        budgets = (  # budgets are the admins' in the API too: below admin the overview leaves them out
            await list_budgets(
                db_session, scope=scope, params=CursorParams(limit=100, after=None, before=None, order="desc")
            )
            if user.role.includes(Role.ADMIN)
            else None
        )
        rows = [row for bucket in buckets for row in bucket.rows]
        return render(
            request,
            "overview.html",
            month_start=start,
            month_chip_us=sum(row.chip_us for row in rows),
            month_requests=sum(row.num_model_requests for row in rows),
            month_tokens=sum(row.input_tokens + row.output_tokens for row in rows),
            run_count=await count_runs_since(db_session, scope=scope, since=start),
            budgets=[_budget_view(b) for b in budgets.data] if budgets is not None else None,
            chart=usage_chart(buckets),
            runs=await recent_runs(db_session, scope=scope),
        )
