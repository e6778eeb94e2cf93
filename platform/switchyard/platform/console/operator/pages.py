"""The operator's pages: tenants (with credits), rate cards, the live fleet and the operator audit log.

Each form goes through the service the operator API uses (``billing.credits``, ``billing.service``), so the same
rules answer and the same audit rows are written, with the operator account as the actor.
"""

from __future__ import annotations

from collections.abc import Awaitable
from decimal import Decimal, InvalidOperation
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.accelerator.pool import UpstreamError
from switchyard.platform.audit.schemas import OperatorAuditEventPublic
from switchyard.platform.audit.service import list_operator_events
from switchyard.platform.billing import credits, service
from switchyard.platform.billing.money import CURRENCY_EXPONENTS, currency_exponent
from switchyard.platform.billing.rates import default_prices
from switchyard.platform.billing.schemas import CreditGrant, RateCardCreate
from switchyard.platform.console.edge import OPERATOR_PREFIX, console_access
from switchyard.platform.console.operator.edge import operator_actor, operator_user
from switchyard.platform.console.operator.queries import fleet_replicas, tenant_page, tenant_summary
from switchyard.platform.console.pages.audit import audit_rows
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError, NotFound
from switchyard.platform.http.pagination import CursorParams, Page
from switchyard.platform.models import utc_now

__all__ = ["FleetPageController", "OperatorAuditPageController", "RateCardPagesController", "TenantPagesController"]

FLEET_REFRESH_S = 2  # the fleet fragment's polling period
_ALL = CursorParams(limit=100, after=None, before=None, order="desc")
_OPERATOR = console_access("operator")


def _page(request: Request[Any, Any, Any], template: str, **context: Any) -> Response[str]:
    return render(request, template, operator=operator_user(request), currencies=sorted(CURRENCY_EXPONENTS), **context)


def _first_error(error: ValidationError | ApiError | ValueError) -> str:
    if isinstance(error, ApiError):
        return str(error.detail)
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return f"{where}: {first.get('msg', 'not accepted')}" if where else str(first.get("msg"))
    return str(error)


def _credit_form(form: Any) -> CreditGrant:
    """The credit form as the API's ``CreditGrant``: the amount is typed in the major unit (``25.00``)."""
    currency = str(form.get("currency", "USD")).strip().upper() or "USD"
    try:
        amount = Decimal(str(form.get("amount", "")).strip())
        exponent = currency_exponent(currency)
    except (InvalidOperation, ValueError, KeyError):
        raise ValueError("the amount is a number such as 25 or 12.50 in a known currency") from None
    minor = amount.scaleb(exponent)
    if not minor.is_finite() or minor != minor.to_integral_value():
        raise ValueError(f"{currency} amounts have at most {exponent} decimal places")
    return CreditGrant.model_validate(
        {"amount_minor": int(minor), "currency": currency, "reason": str(form.get("reason", "")).strip()}
    )


def _rate_card_form(form: Any) -> RateCardCreate:
    """The rate card form as the API's ``RateCardCreate`` (an empty start means now; a start is UTC)."""
    fields: dict[str, Any] = {
        name: str(form.get(name, "")).strip()
        for name in ("instance_type", "price_per_chip_hour", "currency", "model", "tenant_tier", "source")
    }
    required = ("instance_type", "price_per_chip_hour")
    fields = {name: value for name, value in fields.items() if value or name in required}  # empty: the default
    start = str(form.get("effective_from", "")).strip()
    if start:
        fields["effective_from"] = start if start.endswith("Z") or "+" in start else f"{start}Z"
    return RateCardCreate.model_validate(fields)


class TenantPagesController(Controller):
    path = "/"

    @get("/", opt=_OPERATOR)
    async def tenants(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        q: FromQuery[str | None] = None,
        after: FromQuery[str | None] = None,
    ) -> Response[str]:
        """Tenants, newest first, a page at a time; ``q`` finds them by name."""
        q = (q or "").strip()[:200] or None
        tenants, has_more = await tenant_page(db_session, name=q, after=after or None)
        return _page(request, "operator_tenants.html", tenants=tenants, has_more=has_more, q=q)

    @get("/tenants/{tenant_id:str}", opt=_OPERATOR)
    async def tenant(
        self, request: Request[Any, Any, Any], db_session: DbSession, tenant_id: FromPath[str]
    ) -> Response[str]:
        return await self._tenant_page(request, db_session, tenant_id)

    async def _tenant_page(
        self, request: Request[Any, Any, Any], db_session: DbSession, tenant_id: str, **context: Any
    ) -> Response[str]:
        found = await tenant_summary(db_session, tenant_id)
        if found is None:
            raise NotFound(f"no tenant {tenant_id!r}", param="tenant_id")
        granted = await credits.list_credits(db_session, tenant_id=tenant_id)
        return _page(request, "operator_tenant.html", tenant=found, credits=list(reversed(granted)), **context)

    @post("/tenants/{tenant_id:str}/credits", opt=_OPERATOR, status_code=303)
    async def grant_credit(
        self, request: Request[Any, Any, Any], db_session: DbSession, tenant_id: FromPath[str]
    ) -> Response[Any]:
        form = await request.form()
        try:
            data = _credit_form(form)
            await credits.grant_credit(db_session, tenant_id=tenant_id, actor=operator_actor(request), data=data)
        except (ValueError, ValidationError) as error:
            return await self._tenant_page(
                request, db_session, tenant_id, error=_first_error(error), form=form, status_code=400
            )
        except ApiError as error:
            if error.status_code != 400:
                raise
            return await self._tenant_page(
                request, db_session, tenant_id, error=_first_error(error), form=form, status_code=400
            )
        return Redirect(f"{OPERATOR_PREFIX}/tenants/{tenant_id}?granted=1", status_code=303)


class RateCardPagesController(Controller):
    path = "/rate-cards"

    @get("/", opt=_OPERATOR)
    async def rate_cards(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        return await self._page(request, db_session)

    async def _page(
        self, request: Request[Any, Any, Any], db_session: DbSession, *, status_code: int = 200, **context: Any
    ) -> Response[str]:
        cards = await service.list_rate_cards(db_session, params=_ALL)
        return _page(
            request,
            "operator_rate_cards.html",
            cards=cards.data,
            more=cards.has_more,
            instance_types=sorted(default_prices()),
            status_code=status_code,
            **context,
        )

    @post("/", opt=_OPERATOR, status_code=303)
    async def create_rate_card(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        form = await request.form()
        try:
            await service.create_rate_card(db_session, actor=operator_actor(request), data=_rate_card_form(form))
        except (ValueError, ValidationError) as error:
            return await self._page(request, db_session, error=_first_error(error), form=form, status_code=400)
        except ApiError as error:
            if error.status_code not in (400, 409):
                raise
            return await self._page(request, db_session, error=_first_error(error), form=form, status_code=400)
        return Redirect(f"{OPERATOR_PREFIX}/rate-cards?created=1", status_code=303)


class FleetPageController(Controller):
    path = "/fleet"

    @get("/", opt=_OPERATOR)
    async def fleet(self, request: Request[Any, Any, Any]) -> Response[str]:
        return _page(request, "operator_fleet.html", refresh_s=FLEET_REFRESH_S, **await _fleet(request))

    @get("/replicas", opt=_OPERATOR)
    async def replicas(self, request: Request[Any, Any, Any]) -> Response[str]:
        """The fleet table alone, which the fleet page polls (htmx) every ``FLEET_REFRESH_S`` seconds."""
        return _page(request, "operator_fleet_table.html", refresh_s=FLEET_REFRESH_S, **await _fleet(request))


class OperatorAuditPageController(Controller):
    path = "/audit"

    @get("/", opt=_OPERATOR)
    async def audit_log(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        action: FromQuery[str | None] = None,
        after: FromQuery[str | None] = None,
    ) -> Response[str]:
        """Every operator action, newest first (``GET /v1/admin/audit-log``'s rows), filtered by action."""

        def operator_events(params: CursorParams, action: str | None) -> Awaitable[Page[Any]]:
            return list_operator_events(db_session, params, action, OperatorAuditEventPublic.of)

        return _page(request, "operator_audit.html", **await audit_rows(operator_events, action, after))


async def _fleet(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The pool's status, as ``GET /v1/admin/fleet`` answers it (in-process, or the fleet process's)."""
    try:
        deployments = await request.app.state.gateway.status()
    except UpstreamError as exc:
        return {"replicas": [], "unavailable": str(exc), "refreshed_at": utc_now()}
    return {"replicas": fleet_replicas(deployments), "unavailable": None, "refreshed_at": utc_now()}
