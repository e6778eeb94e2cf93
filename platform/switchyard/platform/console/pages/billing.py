"""Billing: budgets (set, remove), invoices (list, detail, CSV) and the rate card (read-only), for admins.

A thin layer over ``billing.service`` and ``billing.render``: the same rules and the same CSV as the API.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.billing import render as billing_render
from switchyard.platform.billing import service
from switchyard.platform.billing.money import currency_exponent
from switchyard.platform.billing.schemas import BudgetSet
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.render import SECURITY_HEADERS, render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of

__all__ = ["BillingPagesController"]

_ALL = CursorParams(limit=100, after=None, before=None, order="desc")


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


def _budget_form(form: Any) -> BudgetSet:
    """The budget form's fields as the API's ``BudgetSet``: the limit is typed in the major unit (``12.50``)."""
    currency = str(form.get("currency", "USD")).strip().upper() or "USD"
    try:
        limit = Decimal(str(form.get("limit", "")).strip())
        exponent = currency_exponent(currency)
    except (InvalidOperation, ValueError, KeyError):
        raise ValueError("the limit is an amount such as 100 or 12.50 in a known currency") from None
    minor = limit.scaleb(exponent)
    if minor != minor.to_integral_value():
        raise ValueError(f"{currency} has {exponent} decimal places")
    return BudgetSet.model_validate(
        {"limit_minor": int(minor), "currency": currency, "scope": "tenant", "hard": form.get("hard") == "on"}
    )


class BillingPagesController(Controller):
    path = "/billing"

    async def _page(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        *,
        error: str | None = None,
        status_code: int = 200,
    ) -> Response[str]:
        scope = console_user(request).scope
        budgets = await service.list_budgets(db_session, scope=scope, params=_ALL)
        invoices = await service.list_invoices(db_session, scope=scope, params=_ALL)
        rate_cards = await service.list_rate_cards(db_session, params=_ALL)
        return render(
            request,
            "billing.html",
            status_code=status_code,
            budgets=budgets.data,
            invoices=invoices.data,
            rate_cards=rate_cards.data,
            error=error,
        )

    @get("/", opt=console_access(Role.ADMIN))
    async def billing(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        return await self._page(request, db_session)

    @post("/budgets", opt=console_access(Role.ADMIN), status_code=303)
    async def set_budget(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        try:
            data = _budget_form(await request.form())
            await service.set_budget(db_session, scope=console_user(request).scope, actor=_actor(request), data=data)
        except (ValueError, ValidationError) as error:
            return await self._page(request, db_session, error=str(error).splitlines()[0], status_code=400)
        except ApiError as error:
            if error.status_code != 400:
                raise
            return await self._page(request, db_session, error=str(error.detail), status_code=400)
        return Redirect(f"{CONSOLE_PREFIX}/billing", status_code=303)

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
