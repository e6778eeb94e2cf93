"""The tenant's audit log (admins and above): every change to the tenant, newest first, filtered by action, actor
and UTC days, and exported as CSV with the same filters.

The rows are those ``GET /v1/audit-log`` lists (``audit.service``), written in the same transaction as each
change, whoever made it: a member in the console, an API key, or an operator. Actors are shown by name
(``audit.actors``) and targets link to their page where there is one. The operator's log
(``console.operator.audit``) is read through the same helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlencode

from litestar import Controller, Request, Response, get
from litestar.params import FromQuery, QueryParameter

from switchyard.platform.audit import service
from switchyard.platform.audit.actors import ActorName, actor_names
from switchyard.platform.audit.export import events_csv
from switchyard.platform.audit.schemas import AuditEventPublic, OperatorAuditEventPublic
from switchyard.platform.audit.service import AuditFilter
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.render import SECURITY_HEADERS, render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.models import utc_now

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = [
    "EXPORT_MAX_ROWS",
    "PAGE_SIZE",
    "ActorQuery",
    "AuditPagesController",
    "AuditRow",
    "audit_csv",
    "audit_filter",
    "audit_rows",
    "tenant_target_href",
]

PAGE_SIZE = 50
EXPORT_MAX_ROWS = 10_000  # an export's bound (newest first); the page says so, the response's header too
TargetHref = Callable[[AuditEventPublic], str | None]
ActorQuery = Annotated[str | None, QueryParameter(name="actor")]  # not `actor`: the API's dependency of that name

_TENANT_PAGES = {  # a target's page: {id} is its id; a page per target is not linked after its deletion
    "agent": "/agents/{id}",
    "run": "/runs/{id}",
    "workflow": "/workflows/{id}",
    "vector_store": "/knowledge/{id}",
    "api_key": "/keys",
    "member": "/members",
    "budget": "/billing",
}


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One event as the table shows it: its actor's name and its target's page (if any)."""

    event: AuditEventPublic
    actor: ActorName
    target_href: str | None


def tenant_target_href(event: AuditEventPublic) -> str | None:
    """The tenant console's page of an event's target, if it has one (and was not deleted by this event)."""
    path = _TENANT_PAGES.get(event.target_type)
    if path is None or not event.target_id or ("{id}" in path and event.action.endswith(".delete")):
        return None
    return CONSOLE_PREFIX + path.format(id=event.target_id)


def _day(value: str | None, param: str) -> date | None:
    value = (value or "").strip()
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidRequest(f"{param} must be a day like 2026-12-06", param=param, code="invalid_value") from None


def audit_filter(action: str | None, actor: str | None, since: str | None, until: str | None) -> AuditFilter:
    """The filter form's fields (empty ones unset); a day that is not one is refused (400)."""
    return AuditFilter(
        action=(action or "").strip()[:64] or None,
        actor=(actor or "").strip()[:64] or None,
        since=_day(since, "since"),
        until=_day(until, "until"),
    )


def _query(filters: AuditFilter) -> str:
    fields = {"action": filters.action, "actor": filters.actor, "since": filters.since, "until": filters.until}
    return urlencode({name: str(value) for name, value in fields.items() if value})


async def audit_rows(
    session: AsyncSession,
    scope: TenantScope | None,
    filters: AuditFilter,
    after: str | None,
    target_href: TargetHref,
) -> dict[str, Any]:
    """What an audit log page shows (the tenant's with ``scope``, the operator's without) as
    ``audit_table.html`` reads it: a page of events newest first after the row ``after``, and the filter's
    choices (the actions and actors the log holds)."""
    params = CursorParams(limit=PAGE_SIZE, after=after or None, before=None, order="desc")
    if scope is None:
        page = await service.list_operator_events(session, params, filters, OperatorAuditEventPublic.of)
    else:
        page = await service.list_events(session, scope, params, filters, AuditEventPublic.of)
    choices = await service.filter_choices(session, scope)
    names = await actor_names(session, {e.actor for e in page.data} | set(choices.actors), scope)
    return {
        "rows": [AuditRow(e, names[e.actor], target_href(e)) for e in page.data],
        "has_more": page.has_more,
        "last_id": page.last_id,
        "filters": filters,
        "filtered": filters != AuditFilter(),
        "query": _query(filters),
        "actions": choices.actions,
        "actors": sorted((names[a] for a in choices.actors), key=lambda n: (n.kind.value, n.label)),
        "export_max_rows": EXPORT_MAX_ROWS,
    }


async def audit_csv(
    session: AsyncSession, scope: TenantScope | None, filters: AuditFilter, *, filename: str
) -> Response[str]:
    """The events of a log matching ``filters`` as a CSV download, newest first, at most ``EXPORT_MAX_ROWS``
    (``x-switchyard-export-truncated: true`` when more matched)."""
    if scope is None:
        events: list[Any] = await service.export_operator_events(session, filters, limit=EXPORT_MAX_ROWS + 1)
    else:
        events = await service.export_events(session, scope, filters, limit=EXPORT_MAX_ROWS + 1)
    truncated = len(events) > EXPORT_MAX_ROWS
    events = events[:EXPORT_MAX_ROWS]
    names = await actor_names(session, {e.actor for e in events}, scope)
    return Response(
        events_csv(events, names),
        media_type="text/csv; charset=utf-8",
        headers={
            **SECURITY_HEADERS,
            "content-disposition": f'attachment; filename="{filename}-{utc_now():%Y%m%dT%H%M%SZ}.csv"',
            "x-switchyard-export-rows": str(len(events)),
            "x-switchyard-export-truncated": "true" if truncated else "false",
        },
    )


class AuditPagesController(Controller):
    path = "/audit"

    @get("/", opt=console_access(Role.ADMIN))
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
        rows = await audit_rows(db_session, console_user(request).scope, filters, after, tenant_target_href)
        return render(request, "audit.html", **rows)

    @get("/export.csv", opt=console_access(Role.ADMIN))
    async def export(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        action: FromQuery[str | None] = None,
        actor_id: ActorQuery = None,
        since: FromQuery[str | None] = None,
        until: FromQuery[str | None] = None,
    ) -> Response[str]:
        """The filtered log as CSV (``audit.export``: cells a spreadsheet would run as formulas are quoted)."""
        filters = audit_filter(action, actor_id, since, until)
        return await audit_csv(db_session, console_user(request).scope, filters, filename="audit-log")
