"""API keys: create (the secret shown once), list with each key's usage this month, revoke after a confirmation
page. A thin layer over ``api_keys.service`` and the usage ledger (``billing.usage``, what ``/v1/usage`` reads)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, FromQuery

from switchyard.platform.api_keys import service
from switchyard.platform.api_keys.schemas import ApiKeyCreated, ApiKeyPublic
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.billing.usage import UsageRow, read_usage, totals
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.flash import redirect_with_flash, render_with_flash
from switchyard.platform.console.render import render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import PermissionDenied
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.models import utc_now

if TYPE_CHECKING:  # a type only: pages issue no SQL (the services they call do)
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["EXPIRY_DAYS", "KeyPagesController"]

EXPIRY_DAYS = {"": "never", "7": "in 7 days", "30": "in 30 days", "90": "in 90 days", "365": "in a year"}
"""When a key made in the console stops working (the API takes any future ``expires_at``)."""


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


async def _usage_this_month(session: AsyncSession, scope: TenantScope) -> dict[str | None, UsageRow]:
    """Each key's usage since the start of this UTC month (``/v1/usage?group_by=api_key_id``'s rows, summed)."""
    now = utc_now().astimezone(UTC)
    month_start = datetime(now.year, now.month, 1, tzinfo=UTC)
    buckets = await read_usage(
        session, scope=scope, start=month_start, end=now + timedelta(hours=1), width="1d", group_by=("api_key_id",)
    )
    return {key_id: row for (key_id,), row in totals(buckets).items()}


def _name(key: ApiKeyPublic) -> str:
    return f"“{key.name}”" if key.name else key.redacted_value


class KeyPagesController(Controller):
    path = "/keys"

    async def _page(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        *,
        after: str | None = None,
        created: ApiKeyCreated | None = None,
        error: str | None = None,
        status_code: int = 200,
    ) -> Response[str]:
        user = console_user(request)
        page = await service.list_keys(
            db_session, scope=user.scope, params=CursorParams(limit=100, after=after, before=None, order="desc")
        )
        return render_with_flash(
            request,
            "keys.html",
            status_code=status_code,
            keys=page.data,
            usage=await _usage_this_month(db_session, user.scope),
            has_more=page.has_more,
            last_id=page.last_id,
            created=created,
            error=error,
            roles=[r.value for r in Role if user.role.includes(r)],
            expiry_days=EXPIRY_DAYS,
        )

    @get("/", opt=console_access(Role.ADMIN))
    async def list_keys(
        self, request: Request[Any, Any, Any], db_session: DbSession, after: FromQuery[str | None] = None
    ) -> Response[str]:
        return await self._page(request, db_session, after=after)

    @post("/", opt=console_access(Role.ADMIN), status_code=200)
    async def create_key(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        """Create a key and show its secret on this one answer (never stored, never shown again)."""
        user = console_user(request)
        form = await request.form()
        name = str(form.get("name", "")).strip()[:200]
        try:
            role = Role(str(form.get("role", "")))
        except ValueError:
            return await self._page(request, db_session, error="Choose a role for the key.", status_code=400)
        days = str(form.get("expires_in_days", ""))
        if days not in EXPIRY_DAYS:
            return await self._page(request, db_session, error="Choose when the key expires.", status_code=400)
        expires_at = utc_now() + timedelta(days=int(days)) if days else None
        try:
            created = await service.create_key(
                db_session,
                scope=user.scope,
                actor=_actor(request),
                actor_role=user.role,
                role=role,
                name=name,
                expires_at=expires_at,
            )
        except PermissionDenied as error:
            return await self._page(request, db_session, error=str(error.detail), status_code=403)
        return await self._page(request, db_session, created=created)

    @get("/{key_id:str}/revoke", opt=console_access(Role.ADMIN))
    async def confirm_revoke(
        self, request: Request[Any, Any, Any], db_session: DbSession, key_id: FromPath[str]
    ) -> Response[str]:
        """Ask before revoking: what stops working, and whether this is an owner key (the tenant's first key is
        one: losing it can leave nothing to administer the tenant through the API)."""
        user = console_user(request)
        key = await service.get_key(db_session, scope=user.scope, key_id=key_id)
        if not user.role.includes(key.role):
            raise PermissionDenied(f"a {user.role.value} cannot revoke a {key.role.value} key")
        usage = (await _usage_this_month(db_session, user.scope)).get(key.id)
        return render(request, "keys_revoke.html", key=key, name=_name(key), usage=usage)

    @post("/{key_id:str}/revoke", opt=console_access(Role.ADMIN), status_code=303)
    async def revoke_key(
        self, request: Request[Any, Any, Any], db_session: DbSession, key_id: FromPath[str]
    ) -> Response[Any]:
        user = console_user(request)
        key = await service.revoke_key(
            db_session,
            scope=user.scope,
            actor=_actor(request),
            actor_role=user.role,
            key_id=key_id,
            key_cache=request.app.state.key_cache,
        )
        return redirect_with_flash(f"{CONSOLE_PREFIX}/keys", f"Key {_name(key)} is revoked.")
