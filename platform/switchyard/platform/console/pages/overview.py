"""The overview: compute this month against the budgets (a gauge each) and the budget alerts fired this month,
usage by day, recent runs. Budgets and alerts are the admins' (as in the API)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from litestar import Controller, Request, Response, get

from switchyard.platform.auth.roles import Role
from switchyard.platform.billing.money import currency_exponent
from switchyard.platform.billing.schemas import BudgetAlertPublic, BudgetPublic
from switchyard.platform.billing.service import list_budget_alerts, list_budgets
from switchyard.platform.billing.usage import read_usage, totals
from switchyard.platform.console.edge import console_access, console_user
from switchyard.platform.console.pages.billing import Coverable, coverables, covers_label
from switchyard.platform.console.pages.usage import money, usage_chart, window
from switchyard.platform.console.queries import count_runs_since, recent_runs
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.models import utc_now

__all__ = ["OverviewController"]


def _amount(value: str, currency: str) -> str:
    """A decimal string of the major unit shown to the currency's places: ``"1.468125"`` → ``"1.47"``."""
    return f"{Decimal(value):,.{currency_exponent(currency)}f}"


def _budget_view(budget: BudgetPublic, known: list[Coverable]) -> dict[str, Any]:
    """A gauge: the real share of the limit spent (past 100 % too), the bar capped at full, and by how much a budget
    is over its limit."""
    places = currency_exponent(budget.currency)
    limit = Decimal(budget.limit_minor).scaleb(-places)
    spent = Decimal(budget.spent)
    # to a tenth of a per cent, so that the gauge of a large limit still moves
    percent = (spent * 100 / limit).quantize(Decimal("0.1")) if limit > 0 else Decimal(100)
    over = spent > limit
    return {
        "id": budget.id,
        "covers": covers_label(budget, known),
        "currency": budget.currency,
        "limit": f"{limit:,.{places}f}",
        "spent": _amount(budget.spent, budget.currency),
        "hard": budget.hard,
        "percent": percent,
        "bar": f"{min(percent, Decimal(100)):f}",  # a meter shows no more than its max: the text says the rest
        "over": f"{spent - limit:,.{places}f}" if over else None,
        "alert_thresholds": budget.alert_thresholds,
        "alerts_fired": budget.alerts_fired,
    }


def _alert_view(alert: BudgetAlertPublic, known: list[Coverable], budgets: list[BudgetPublic]) -> dict[str, Any]:
    budget = next((b for b in budgets if b.id == alert.budget_id), None)
    return {
        "covers": covers_label(budget, known) if budget else alert.scope,
        "threshold_pct": alert.threshold_pct,
        "spent": _amount(alert.spent, alert.currency),
        "currency": alert.currency,
        "created_at": alert.created_at,
    }


class OverviewController(Controller):
    path = "/"

    @get("/", opt=console_access(Role.VIEWER))
    async def overview(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        user = console_user(request)
        scope = user.scope
        month = window("month", None, None, utc_now())
        start = month.start
        buckets = await read_usage(
            db_session,
            scope=scope,
            start=month.start,
            end=month.end,
            width="1d",
            group_by=("model",),
            priced=user.role.includes(Role.ADMIN),
        )
        budgets: list[dict[str, Any]] | None = None  # the admins' in the API too: below admin the overview
        alerts: list[dict[str, Any]] | None = None  # leaves budgets and their alerts out
        if user.role.includes(Role.ADMIN):
            listed = await list_budgets(
                db_session, scope=scope, params=CursorParams(limit=100, after=None, before=None, order="desc")
            )
            known = await coverables(db_session, scope=scope)
            order = {"tenant": 0, "api_key": 1, "agent": 2}  # the tenant's gauge first, then keys, then agents
            shown = sorted(listed.data, key=lambda b: (order.get(b.scope, 3), covers_label(b, known)))
            budgets = [_budget_view(b, known) for b in shown]
            fired = await list_budget_alerts(db_session, scope=scope)
            alerts = [_alert_view(a, known, listed.data) for a in fired]
        month_total = totals(buckets, ()).get(())
        return render(
            request,
            "overview.html",
            month_start=start,
            month=month_total,
            month_money=money(month_total.cost_micros) if month_total else None,
            show_money=user.role.includes(Role.ADMIN),
            base_url=str(request.base_url).rstrip("/") + "/v1",
            run_count=await count_runs_since(db_session, scope=scope, since=start),
            budgets=budgets,
            alerts=alerts,
            chart=usage_chart(buckets, "model", {}),
            runs=await recent_runs(db_session, scope=scope),
        )
