"""The audit logs: one row per mutation, in the same transaction as the mutation.

A tenant's log (``record``) holds every change to the tenant, whoever made it; the operator log
(``record_operator``) holds every operator action, platform-wide ones (rate cards, the fleet) included.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.models import AuditEvent, OperatorAuditEvent

__all__ = ["list_events", "list_operator_events", "record", "record_operator"]


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
    session: AsyncSession, scope: TenantScope, params: CursorParams, action: str | None, to_public: Any
) -> Page[Any]:
    statement = select(AuditEvent).where(col(AuditEvent.tenant_id) == scope.tenant_id)
    if action:
        statement = statement.where(col(AuditEvent.action) == action)
    return await paginate(session, statement, col(AuditEvent.id), params, to_public)


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
    session: AsyncSession, params: CursorParams, action: str | None, to_public: Any
) -> Page[Any]:
    statement = select(OperatorAuditEvent)
    if action:
        statement = statement.where(col(OperatorAuditEvent.action) == action)
    return await paginate(session, statement, col(OperatorAuditEvent.id), params, to_public)
