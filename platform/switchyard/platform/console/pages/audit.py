"""The tenant's audit log (admins and above): every change to the tenant, newest first, filtered by action.

The rows are those ``GET /v1/audit-log`` lists (``audit.service.list_events``), written in the same transaction as
each change, whoever made it: a member in the console, an API key, or an operator.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get
from litestar.params import FromQuery

from switchyard.platform.audit import service
from switchyard.platform.audit.schemas import AuditEventPublic
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import console_access, console_user
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.pagination import CursorParams

__all__ = ["AuditPagesController", "audit_page_params"]

PAGE_SIZE = 50


def audit_page_params(after: str | None) -> CursorParams:
    """One page of an audit log, newest first, after the row ``after`` (the previous page's last)."""
    return CursorParams(limit=PAGE_SIZE, after=after or None, before=None, order="desc")


class AuditPagesController(Controller):
    path = "/audit"

    @get("/", opt=console_access(Role.ADMIN))
    async def audit_log(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        action: FromQuery[str | None] = None,
        after: FromQuery[str | None] = None,
    ) -> Response[str]:
        action = (action or "").strip() or None
        scope = console_user(request).scope
        page = await service.list_events(db_session, scope, audit_page_params(after), action, AuditEventPublic.of)
        return render(
            request, "audit.html", events=page.data, has_more=page.has_more, last_id=page.last_id, action=action
        )
