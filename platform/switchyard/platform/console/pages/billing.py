"""Billing: budgets of the tenant, its keys and agents (set, edit, remove), invoices (list, detail, CSV) and the
rate card (read-only), for admins.

A thin layer over ``billing.service`` and ``billing.render``: the same rules, the same validation and the same
CSV as the API. A refused form is shown again with the reason, and its unit of work is rolled back, so nothing
of it is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.platform.agent_registry.service import list_agents
from switchyard.platform.api_keys.service import list_keys
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.billing import render as billing_render
from switchyard.platform.billing import service
from switchyard.platform.billing.budgets import ALERT_THRESHOLDS
from switchyard.platform.billing.money import currency_exponent, format_minor
from switchyard.platform.billing.schemas import MAX_LIMIT_MINOR, BudgetPublic, BudgetSet
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.render import SECURITY_HEADERS, render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.models import utc_now

if TYPE_CHECKING:  # a type only: pages issue no SQL (the services they call do)
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["BillingPagesController", "Coverable", "coverables"]

_ALL = CursorParams(limit=100, after=None, before=None, order="desc")
_SHOWN_ERRORS = {400, 404, 409}  # a form's mistakes: shown on the page; anything else is the error page
DEFAULT_THRESHOLDS = ", ".join(str(pct) for pct in ALERT_THRESHOLDS)


@dataclass(frozen=True, slots=True)
class Coverable:
    """What a budget can cover, as the budget form's select offers it (``value`` is ``scope:scope_id``)."""

    scope: str
    scope_id: str
    label: str

    @property
    def value(self) -> str:
        return self.scope if self.scope == "tenant" else f"{self.scope}:{self.scope_id}"


async def coverables(session: AsyncSession, *, scope: TenantScope) -> list[Coverable]:
    """The tenant, its working API keys and its agents (what ``check_budget_scope`` accepts), with their names."""
    now = utc_now()
    keys = (await list_keys(session, scope=scope, params=_ALL)).data
    agents = (await list_agents(session, scope=scope, params=_ALL)).data
    return [
        Coverable("tenant", "", "The whole tenant"),
        *(
            Coverable("api_key", k.id, f"API key {k.name or k.redacted_value}")
            for k in keys
            if k.revoked_at is None and (k.expires_at is None or k.expires_at > now)
        ),
        *(Coverable("agent", a.id, f"Agent {a.name}") for a in agents),
    ]


def covers_label(budget: BudgetPublic, known: list[Coverable]) -> str:
    """What a budget covers, by name where the key or agent is still there (else by id)."""
    for coverable in known:
        if (coverable.scope, coverable.scope_id) == (budget.scope, budget.scope_id):
            return coverable.label
    return {"api_key": "API key", "agent": "Agent"}.get(budget.scope, budget.scope) + f" {budget.scope_id}"


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


def _thresholds(text: str) -> list[int] | None:
    """``"10, 50 90"`` → ``[10, 50, 90]``; empty → ``None`` (the defaults). Range and count are ``BudgetSet``'s."""
    parts = [part for part in re.split(r"[\s,;%]+", text) if part]
    if not parts:
        return None
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError(f"alert thresholds are whole percentages such as {DEFAULT_THRESHOLDS}")
    return [int(part) for part in parts]


def _budget_form(form: Any) -> BudgetSet:
    """The budget form's fields as the API's ``BudgetSet``: the limit is typed in the major unit (``12.50``), the
    thresholds as percentages (``10, 50``), and what it covers is ``tenant``, ``api_key:<id>`` or ``agent:<id>``."""
    currency = str(form.get("currency", "USD")).strip().upper() or "USD"
    try:
        limit = Decimal(str(form.get("limit", "")).strip())
        exponent = currency_exponent(currency)
    except (InvalidOperation, ValueError, KeyError):
        raise ValueError("the limit is an amount such as 100 or 12.50 in a known currency") from None
    largest = Decimal(MAX_LIMIT_MINOR).scaleb(-exponent)
    # bounded before it is scaled: 1e999999 would overflow the decimal context, and 5,000 digits make an int
    # that pydantic cannot print in its refusal
    if not limit.is_finite() or limit < 0 or limit > largest:
        raise ValueError(f"the limit is an amount from 0 to {largest:f} {currency}, such as 100 or 12.50")
    minor = limit.scaleb(exponent)
    if minor != minor.to_integral_value():
        raise ValueError(f"{currency} has {exponent} decimal places")
    kind, _, scope_id = str(form.get("covers", "tenant")).partition(":")
    return BudgetSet.model_validate(
        {
            "limit_minor": int(minor),
            "currency": currency,
            "scope": kind,
            "scope_id": scope_id,
            "hard": form.get("hard") == "on",
            "alert_thresholds": _thresholds(str(form.get("alert_thresholds", ""))),
        }
    )


def _problem(error: ValidationError) -> str:
    """A refused ``BudgetSet`` in the form's words: the field and pydantic's reason for each problem."""
    names = {"limit_minor": "limit", "scope": "covers", "scope_id": "covers"}
    parts = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else "form"
        parts.append(f"{names.get(field, field).replace('_', ' ')}: {item['msg']}")
    return "; ".join(parts)


def _prefill(budget: BudgetPublic) -> dict[str, Any]:
    """The form's fields for changing ``budget``."""
    return {
        "covers": budget.scope if budget.scope == "tenant" else f"{budget.scope}:{budget.scope_id}",
        "limit": format_minor(budget.limit_minor, budget.currency),
        "currency": budget.currency,
        "alert_thresholds": ", ".join(str(pct) for pct in budget.alert_thresholds),
        "hard": budget.hard,
    }


class BillingPagesController(Controller):
    path = "/billing"

    async def _page(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        *,
        error: str | None = None,
        status_code: int = 200,
        form: dict[str, Any] | None = None,
        editing: BudgetPublic | None = None,
    ) -> Response[str]:
        scope = console_user(request).scope
        budgets = await service.list_budgets(db_session, scope=scope, params=_ALL)
        invoices = await service.list_invoices(db_session, scope=scope, params=_ALL)
        rate_cards = await service.list_rate_cards(db_session, params=_ALL)
        known = await coverables(db_session, scope=scope)
        return render(
            request,
            "billing.html",
            status_code=status_code,
            budgets=[(b, covers_label(b, known)) for b in budgets.data],
            coverables=known,
            editing=(editing, covers_label(editing, known)) if editing else None,
            form=form or {"covers": "tenant", "currency": "USD", "hard": True},
            default_thresholds=DEFAULT_THRESHOLDS,
            invoices=invoices.data,
            rate_cards=rate_cards.data,
            error=error,
        )

    @get("/", opt=console_access(Role.ADMIN))
    async def billing(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        return await self._page(request, db_session)

    @get("/budgets/{budget_id:str}", opt=console_access(Role.ADMIN))
    async def edit_budget(
        self, request: Request[Any, Any, Any], db_session: DbSession, budget_id: FromPath[str]
    ) -> Response[str]:
        """The billing page with the budget form filled in from ``budget_id`` (what it covers stays)."""
        budget = await service.get_budget(db_session, scope=console_user(request).scope, budget_id=budget_id)
        return await self._page(request, db_session, form=_prefill(budget), editing=budget)

    @post("/budgets", opt=console_access(Role.ADMIN), status_code=303)
    async def set_budget(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        form = await request.form()
        shown = {name: form.get(name, "") for name in ("covers", "limit", "currency", "alert_thresholds")}
        shown["hard"] = form.get("hard") == "on"
        try:
            data = _budget_form(form)
            await service.set_budget(db_session, scope=console_user(request).scope, actor=_actor(request), data=data)
        except ValidationError as error:
            message = _problem(error)
        except ValueError as error:
            message = str(error)
        except ApiError as error:
            if error.status_code not in _SHOWN_ERRORS:
                raise
            message = error.message
        else:
            return Redirect(f"{CONSOLE_PREFIX}/billing", status_code=303)
        await db_session.rollback()  # the page is committed after this handler: keep nothing of a refused form
        return await self._page(request, db_session, error=message, status_code=400, form=shown)

    @post("/budgets/{budget_id:str}/remove", opt=console_access(Role.ADMIN), status_code=303)
    async def remove_budget(
        self, request: Request[Any, Any, Any], db_session: DbSession, budget_id: FromPath[str]
    ) -> Response[Any]:
        user = console_user(request)
        await service.delete_budget(db_session, scope=user.scope, actor=_actor(request), budget_id=budget_id)
        return Redirect(f"{CONSOLE_PREFIX}/billing", status_code=303)

    @get("/invoices/{invoice_id:str}", opt=console_access(Role.ADMIN))
    async def invoice(
        self, request: Request[Any, Any, Any], db_session: DbSession, invoice_id: FromPath[str]
    ) -> Response[str]:
        invoice = await service.get_invoice(db_session, scope=console_user(request).scope, invoice_id=invoice_id)
        return render(request, "invoice.html", invoice=invoice)

    @get("/invoices/{invoice_id:str}/csv", opt=console_access(Role.ADMIN))
    async def invoice_csv(
        self, request: Request[Any, Any, Any], db_session: DbSession, invoice_id: FromPath[str]
    ) -> Response[str]:
        """The invoice as CSV: the API's own rendering, as a download."""
        invoice = await service.get_invoice(db_session, scope=console_user(request).scope, invoice_id=invoice_id)
        return Response(
            billing_render.invoice_csv(invoice),
            media_type="text/csv",
            headers={**SECURITY_HEADERS, "content-disposition": f'attachment; filename="{invoice.id}.csv"'},
        )
