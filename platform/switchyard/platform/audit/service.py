"""The audit logs: one row per mutation, in the same transaction as the mutation.

A tenant's log (``record``) holds every change to the tenant, whoever made it; the operator log
(``record_operator``) holds every operator action, platform-wide ones (rate cards, the fleet) included. Both are
read a page at a time (``list_events``, ``list_operator_events``) or in bulk for an export (``export_events``,
``export_operator_events``), narrowed by an ``AuditFilter``; ``filter_choices`` says which actions and actors a
log holds, to choose from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.models import AuditEvent, OperatorAuditEvent

__all__ = [
    "AuditFilter",
    "FilterChoices",
    "export_events",
    "export_operator_events",
    "filter_choices",
    "list_events",
    "list_operator_events",
    "record",
    "record_operator",
]

MAX_CHOICES = 500  # distinct actions or actors offered to choose from; a log with more is filtered by typing


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which events of a log to read; each field set narrows the events, an empty filter reads them all."""

    action: str | None = None
    actor: str | None = None
    """The actor's id as recorded (``mem_...``, ``key_...``, ``opa_...``, ``cli``)."""
    since: date | None = None
    """The first UTC day included."""
    until: date | None = None
    """The last UTC day included."""

    def narrow(self, statement: Select[Any], table: type[AuditEvent] | type[OperatorAuditEvent]) -> Select[Any]:
        if self.action:
            statement = statement.where(col(table.action) == self.action)
        if self.actor:
            statement = statement.where(col(table.actor) == self.actor)
        if self.since is not None:
            statement = statement.where(col(table.created_at) >= _day_start(self.since))
        if self.until is not None:
            statement = statement.where(col(table.created_at) < _day_start(self.until + timedelta(days=1)))
        return statement


@dataclass(frozen=True, slots=True)
class FilterChoices:
    """The distinct actions and actor ids a log holds, sorted (at most ``MAX_CHOICES`` of each)."""

    actions: list[str]
    actors: list[str]


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def _log(scope: TenantScope | None) -> tuple[Select[Any], type[AuditEvent] | type[OperatorAuditEvent]]:
    """The tenant's log with a scope, the operator log without."""
    if scope is None:
        return select(OperatorAuditEvent), OperatorAuditEvent
    return select(AuditEvent).where(col(AuditEvent.tenant_id) == scope.tenant_id), AuditEvent


def record(
    session: AsyncSession,
    *,
    tenant_id: str,
    actor: Actor,
    action: str,
    target_type: str,
    target_id: str,
    details: dict[str, Any] | None = None,
    by_operator: bool = False,
) -> AuditEvent:
    """Add an audit row to the session; it commits (or rolls back) with the change it describes.

    ``by_operator``: an operator made the change, so it goes into the operator log as well.
    """
    if by_operator:
        record_operator(
            session, actor=actor, action=action, target_type=target_type, target_id=target_id, details=details
        )
    event = AuditEvent(
        id=new_id("aud"),
        tenant_id=tenant_id,
        actor=actor.key_id,
        action=action,
        target_type=target_type,
        target_id=target_id,
        details=details or {},
        request_id=actor.request_id,
    )
    session.add(event)
    return event


async def list_events(
    session: AsyncSession, scope: TenantScope, params: CursorParams, filters: AuditFilter, to_public: Any
) -> Page[Any]:
    """A page of the tenant's log, narrowed by ``filters``."""
    statement, table = _log(scope)
    return await paginate(session, filters.narrow(statement, table), col(table.id), params, to_public)


async def export_events(
    session: AsyncSession, scope: TenantScope, filters: AuditFilter, *, limit: int
) -> list[AuditEvent]:
    """The tenant's newest events matching ``filters``, at most ``limit`` (ask one more to learn if any are left)."""
    return await _export(session, scope, filters, limit)  # type: ignore[return-value]


async def export_operator_events(
    session: AsyncSession, filters: AuditFilter, *, limit: int
) -> list[OperatorAuditEvent]:
    """The operator log's newest events matching ``filters``, at most ``limit``."""
    return await _export(session, None, filters, limit)  # type: ignore[return-value]


async def _export(
    session: AsyncSession, scope: TenantScope | None, filters: AuditFilter, limit: int
) -> list[AuditEvent | OperatorAuditEvent]:
    statement, table = _log(scope)
    statement = filters.narrow(statement, table).order_by(col(table.id).desc()).limit(limit)
    return list((await session.execute(statement)).scalars())


async def filter_choices(session: AsyncSession, scope: TenantScope | None) -> FilterChoices:
    """The actions and actors of the tenant's log (the operator log's when ``scope`` is None)."""
    statement, table = _log(scope)
    found: list[list[str]] = []
    for column in (col(table.action), col(table.actor)):
        distinct_values = statement.with_only_columns(column).distinct().order_by(column).limit(MAX_CHOICES)
        found.append([str(value) for value in (await session.execute(distinct_values)).scalars()])
    return FilterChoices(actions=found[0], actors=found[1])


def record_operator(
    session: AsyncSession,
    *,
    actor: Actor,
    action: str,
    target_type: str,
    target_id: str,
    details: dict[str, Any] | None = None,
) -> OperatorAuditEvent:
    """Add an operator audit row to the session; it commits (or rolls back) with the change it describes."""
    event = OperatorAuditEvent(
        id=new_id("oau"),
        actor=actor.key_id,
        action=action,
        target_type=target_type,
        target_id=target_id,
        details=details or {},
        request_id=actor.request_id,
    )
    session.add(event)
    return event


async def list_operator_events(
    session: AsyncSession, params: CursorParams, filters: AuditFilter, to_public: Any
) -> Page[Any]:
    """A page of the operator log, narrowed by ``filters``."""
    statement, table = _log(None)
    return await paginate(session, filters.narrow(statement, table), col(table.id), params, to_public)
