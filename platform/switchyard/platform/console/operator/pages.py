"""The operator's pages: rate cards and the live fleet, and what every operator page shares (``operator_page``,
``first_error``); tenants are in ``console.operator.tenants``, the operator audit log in ``console.operator.audit``.

Each form goes through the service the operator API uses (``billing.service``), so the same rules answer and the
same audit rows are written, with the operator account as the actor.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from pydantic import ValidationError

from switchyard.accelerator.pool import UpstreamError
from switchyard.platform.billing import service
from switchyard.platform.billing.money import CURRENCY_EXPONENTS
from switchyard.platform.billing.rates import default_prices
from switchyard.platform.billing.schemas import RateCardCreate
from switchyard.platform.console.edge import OPERATOR_PREFIX, console_access
from switchyard.platform.console.flash import redirect_with_flash, render_with_flash
from switchyard.platform.console.operator.edge import operator_actor, operator_user
from switchyard.platform.console.operator.queries import fleet_replicas
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.models import utc_now

__all__ = ["FleetPageController", "RateCardPagesController", "first_error", "operator_page"]

FLEET_REFRESH_S = 2  # the fleet fragment's polling period
_ALL = CursorParams(limit=100, after=None, before=None, order="desc")
_OPERATOR = console_access("operator")


def operator_page(request: Request[Any, Any, Any], template: str, **context: Any) -> Response[str]:
    """An operator page: ``template`` with the signed-in operator and the flash the previous action left (if any)."""
    return render_with_flash(
        request, template, operator=operator_user(request), currencies=sorted(CURRENCY_EXPONENTS), **context
    )


def first_error(error: ValidationError | ApiError | ValueError) -> str:
    if isinstance(error, ApiError):
        return str(error.detail)
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return f"{where}: {first.get('msg', 'not accepted')}" if where else str(first.get("msg"))
    return str(error)


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


class RateCardPagesController(Controller):
    path = "/rate-cards"

    @get("/", opt=_OPERATOR)
    async def rate_cards(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        return await self._page(request, db_session)

    async def _page(
        self, request: Request[Any, Any, Any], db_session: DbSession, *, status_code: int = 200, **context: Any
    ) -> Response[str]:
        cards = await service.list_rate_cards(db_session, params=_ALL)
        return operator_page(
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
            return await self._page(request, db_session, error=first_error(error), form=form, status_code=400)
        except ApiError as error:
            if error.status_code not in (400, 409):
                raise
            return await self._page(request, db_session, error=first_error(error), form=form, status_code=400)
        return redirect_with_flash(f"{OPERATOR_PREFIX}/rate-cards", "Rate card added.")


class FleetPageController(Controller):
    path = "/fleet"

    @get("/", opt=_OPERATOR)
    async def fleet(self, request: Request[Any, Any, Any]) -> Response[str]:
        return operator_page(request, "operator_fleet.html", refresh_s=FLEET_REFRESH_S, **await _fleet(request))

    @get("/replicas", opt=_OPERATOR)
    async def replicas(self, request: Request[Any, Any, Any]) -> Response[str]:
        """The fleet table alone, which the fleet page polls (htmx) every ``FLEET_REFRESH_S`` seconds."""
        return operator_page(request, "operator_fleet_table.html", refresh_s=FLEET_REFRESH_S, **await _fleet(request))


async def _fleet(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The pool's status, as ``GET /v1/admin/fleet`` answers it (in-process, or the fleet process's)."""
    try:
        deployments = await request.app.state.gateway.status()
    except UpstreamError as exc:
        return {"replicas": [], "unavailable": str(exc), "refreshed_at": utc_now()}
    return {"replicas": fleet_replicas(deployments), "unavailable": None, "refreshed_at": utc_now()}
