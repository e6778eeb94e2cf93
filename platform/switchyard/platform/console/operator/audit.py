"""The operator audit log: every operator action, newest first (``GET /v1/admin/audit-log``'s rows), filtered by
action, actor and UTC days and exported as CSV, through the tenant log's helpers (``console.pages.audit``)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get
from litestar.params import FromQuery

from switchyard.platform.audit.schemas import AuditEventPublic
from switchyard.platform.console.edge import OPERATOR_PREFIX, console_access
from switchyard.platform.console.operator.pages import operator_page
from switchyard.platform.console.pages.audit import ActorQuery, audit_csv, audit_filter, audit_rows
from switchyard.platform.deps import DbSession

__all__ = ["OperatorAuditPageController", "operator_target_href"]

_OPERATOR = console_access("operator")
_PAGES = {"tenant": "/tenants/{id}", "rate_card": "/rate-cards"}


def operator_target_href(event: AuditEventPublic) -> str | None:
    """The operator console's page of an event's target: a tenant's (also for a change inside a tenant that names
    it, such as a member's password reset), the rate cards."""
    tenant_id = event.details.get("tenant_id") if event.target_type != "tenant" else event.target_id
    if isinstance(tenant_id, str) and tenant_id:
        return f"{OPERATOR_PREFIX}/tenants/{tenant_id}"
    path = _PAGES.get(event.target_type)
    return f"{OPERATOR_PREFIX}{path.format(id=event.target_id)}" if path and event.target_id else None


class OperatorAuditPageController(Controller):
    path = "/audit"

    @get("/", opt=_OPERATOR)
    async def audit_log(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        action: FromQuery[str | None] = None,
        actor_id: ActorQuery = None,
        since: FromQuery[str | None] = None,
        until: FromQuery[str | None] = None,
        after: FromQuery[str | None] = None,
    ) -> Response[str]:
        filters = audit_filter(action, actor_id, since, until)
        rows = await audit_rows(db_session, None, filters, after, operator_target_href)
        return operator_page(request, "operator_audit.html", **rows)

    @get("/export.csv", opt=_OPERATOR)
    async def export(
        self,
        db_session: DbSession,
        action: FromQuery[str | None] = None,
        actor_id: ActorQuery = None,
        since: FromQuery[str | None] = None,
        until: FromQuery[str | None] = None,
    ) -> Response[str]:
        filters = audit_filter(action, actor_id, since, until)
        return await audit_csv(db_session, None, filters, filename="operator-audit-log")
