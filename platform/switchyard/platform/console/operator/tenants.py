"""The operator's tenant pages: find and create tenants; on a tenant's page suspend it (after a confirmation page)
or reactivate it, issue a member a password-reset link, and grant credits.

Each form goes through the service the operator API and CLI use (``tenants.service``, ``billing.credits``,
``identity.password_resets``), so the same rules answer and the same audit rows are written, with the operator
account as the actor, in the operator audit log as well as the tenant's.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, FromQuery
from pydantic import ValidationError

from switchyard.platform.audit.actors import actor_names
from switchyard.platform.audit.service import record_operator
from switchyard.platform.auth.roles import Role
from switchyard.platform.billing import credits
from switchyard.platform.billing.money import currency_exponent
from switchyard.platform.billing.schemas import CreditGrant
from switchyard.platform.console.edge import OPERATOR_PREFIX, console_access
from switchyard.platform.console.flash import redirect_with_flash
from switchyard.platform.console.operator.edge import operator_actor
from switchyard.platform.console.operator.pages import first_error, operator_page
from switchyard.platform.console.operator.queries import tenant_page, tenant_summary
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError, NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.identity.password_resets import issue_reset, reset_link
from switchyard.platform.members.service import list_members
from switchyard.platform.tenants.schemas import TenantCreate
from switchyard.platform.tenants.service import create_tenant, set_suspended

__all__ = ["TenantPagesController"]

_OPERATOR = console_access("operator")
_MEMBERS = CursorParams(limit=100, after=None, before=None, order="asc")


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


def _tenant_form(form: Any) -> TenantCreate:
    """The new-tenant form as the API's ``TenantCreate`` (an empty owner e-mail: the placeholder address)."""
    email = str(form.get("owner_email", "")).strip()
    return TenantCreate.model_validate({"name": str(form.get("name", "")).strip(), "owner_email": email or None})


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
        return await self._tenants_page(request, db_session, q=q, after=after)

    async def _tenants_page(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        *,
        q: str | None = None,
        after: str | None = None,
        **context: Any,
    ) -> Response[str]:
        q = (q or "").strip()[:200] or None
        tenants, has_more = await tenant_page(db_session, name=q, after=after or None)
        return operator_page(request, "operator_tenants.html", tenants=tenants, has_more=has_more, q=q, **context)

    @post("/tenants", opt=_OPERATOR, status_code=200)
    async def create(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        """A tenant with its first owner (``POST /v1/admin/tenants``): the owner's invitation link and API key are
        shown this once."""
        form = await request.form()
        try:
            data = _tenant_form(form)
        except ValidationError as error:
            return await self._tenants_page(
                request, db_session, create_error=first_error(error), create_form=form, status_code=400
            )
        created = await create_tenant(
            db_session,
            actor=operator_actor(request),
            name=data.name,
            owner_email=data.owner_email,
            invitation_base_url=str(request.base_url),
        )
        return operator_page(request, "operator_tenant_created.html", created=created)

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
        scope = TenantScope(tenant_id)
        granted = await credits.list_credits(db_session, tenant_id=tenant_id)
        members = await list_members(db_session, scope=scope, params=_MEMBERS)
        granted_by = await actor_names(db_session, {c.granted_by for c in granted}, scope)
        return operator_page(
            request,
            "operator_tenant.html",
            tenant=found,
            members=members.data,
            more_members=members.has_more,
            credits=list(reversed(granted)),
            granted_by=granted_by,
            **context,
        )

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
                request, db_session, tenant_id, error=first_error(error), form=form, status_code=400
            )
        except ApiError as error:
            if error.status_code != 400:
                raise
            return await self._tenant_page(
                request, db_session, tenant_id, error=first_error(error), form=form, status_code=400
            )
        return redirect_with_flash(f"{OPERATOR_PREFIX}/tenants/{tenant_id}", "Credit granted.")

    @post("/tenants/{tenant_id:str}/members/{member_id:str}/password-reset", opt=_OPERATOR, status_code=200)
    async def reset_password(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant_id: FromPath[str],
        member_id: FromPath[str],
    ) -> Response[str]:
        """A one-time link with which a member of the tenant (an owner too) chooses a new password, shown this once
        to pass on; a newer link replaces an older one. In the tenant's log (``member.password_reset_issue``) and
        the operator log."""
        if await tenant_summary(db_session, tenant_id) is None:
            raise NotFound(f"no tenant {tenant_id!r}", param="tenant_id")
        actor = operator_actor(request)
        issued = await issue_reset(
            db_session, scope=TenantScope(tenant_id), actor=actor, actor_role=Role.OWNER, member_id=member_id
        )
        record_operator(
            db_session,
            actor=actor,
            action="member.password_reset_issue",
            target_type="member",
            target_id=member_id,
            details={"tenant_id": tenant_id, "email": issued.reset.email, "reset_id": issued.reset.id},
        )
        link = reset_link(str(request.base_url), issued.secret)
        return await self._tenant_page(request, db_session, tenant_id, reset=issued.reset, reset_link=link)

    @get("/tenants/{tenant_id:str}/suspend", opt=_OPERATOR)
    async def confirm_suspension(
        self, request: Request[Any, Any, Any], db_session: DbSession, tenant_id: FromPath[str]
    ) -> Response[str]:
        """What suspending does, and the button that does it."""
        found = await tenant_summary(db_session, tenant_id)
        if found is None:
            raise NotFound(f"no tenant {tenant_id!r}", param="tenant_id")
        return operator_page(request, "operator_tenant_suspend.html", tenant=found)

    @post("/tenants/{tenant_id:str}/suspend", opt=_OPERATOR, status_code=303)
    async def suspend(
        self, request: Request[Any, Any, Any], db_session: DbSession, tenant_id: FromPath[str]
    ) -> Response[Any]:
        """``POST /v1/admin/tenants/{id}/suspend``: the tenant's keys and members' sessions stop working."""
        tenant = await set_suspended(db_session, actor=operator_actor(request), tenant_id=tenant_id, suspended=True)
        return redirect_with_flash(f"{OPERATOR_PREFIX}/tenants/{tenant_id}", f"{tenant.name} is suspended.")

    @post("/tenants/{tenant_id:str}/reactivate", opt=_OPERATOR, status_code=303)
    async def reactivate(
        self, request: Request[Any, Any, Any], db_session: DbSession, tenant_id: FromPath[str]
    ) -> Response[Any]:
        """``POST /v1/admin/tenants/{id}/reactivate``: the tenant's keys and members work again."""
        tenant = await set_suspended(db_session, actor=operator_actor(request), tenant_id=tenant_id, suspended=False)
        return redirect_with_flash(f"{OPERATOR_PREFIX}/tenants/{tenant_id}", f"{tenant.name} is active again.")
