"""The tenant's audit log (admins and above): every change to the tenant, newest first, filtered by action.

The rows are those ``GET /v1/audit-log`` lists (``audit.service.list_events``), written in the same transaction as
each change, whoever made it: a member in the console, an API key, or an operator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Controller, Request, Response, get
from litestar.params import FromQuery

from switchyard.platform.audit import service
from switchyard.platform.audit.schemas import AuditEventPublic
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import console_access, console_user
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.pagination import CursorParams, Page

__all__ = ["AuditPagesController", "audit_rows"]

PAGE_SIZE = 50
ListEvents = Callable[[CursorParams, str | None], Awaitable[Page[Any]]]


async def audit_rows(list_events: ListEvents, action: str | None, after: str | None) -> dict[str, Any]:
    """What an audit log page shows: a page of ``list_events`` (newest first, after the row ``after``, with
    ``action`` when one is given) as the ``audit_table.html`` template reads it."""
    action = (action or "").strip() or None
    page = await list_events(CursorParams(limit=PAGE_SIZE, after=after or None, before=None, order="desc"), action)
    return {"events": page.data, "has_more": page.has_more, "last_id": page.last_id, "action": action}


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
        scope = console_user(request).scope

        def tenant_events(params: CursorParams, action: str | None) -> Awaitable[Page[Any]]:
            return service.list_events(db_session, scope, params, action, AuditEventPublic.of)

        return render(request, "audit.html", **await audit_rows(tenant_events, action, after))
