"""API keys: create (the secret shown once), list, revoke. A thin layer over ``api_keys.service``."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect

from switchyard.platform.api_keys import service
from switchyard.platform.api_keys.schemas import ApiKeyCreated
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import PermissionDenied
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of

__all__ = ["KeyPagesController"]


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


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
        return render(
            request,
            "keys.html",
            status_code=status_code,
            keys=page.data,
            has_more=page.has_more,
            last_id=page.last_id,
            created=created,
            error=error,
            roles=[r.value for r in Role if user.role.includes(r)],
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
        try:
            created = await service.create_key(
                db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, role=role, name=name
            )
        except PermissionDenied as error:
            return await self._page(request, db_session, error=str(error.detail), status_code=403)
        return await self._page(request, db_session, created=created)

    @post("/{key_id:str}/revoke", opt=console_access(Role.ADMIN), status_code=303)
    async def revoke_key(
        self, request: Request[Any, Any, Any], db_session: DbSession, key_id: FromPath[str]
    ) -> Response[Any]:
        user = console_user(request)
        await service.revoke_key(
            db_session,
            scope=user.scope,
            actor=_actor(request),
            actor_role=user.role,
            key_id=key_id,
            key_cache=request.app.state.key_cache,
        )
        return Redirect(f"{CONSOLE_PREFIX}/keys", status_code=303)
