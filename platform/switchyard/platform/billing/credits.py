"""Credits: amounts operators grant a tenant, applied once as a negative line of its next finalized invoice, up to
what that invoice adds up to (the unused remainder stays open as a new credit: see ``billing.invoices``)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.billing.invoices import ensure_drafts
from switchyard.platform.billing.schemas import CreditGrant, CreditPublic
from switchyard.platform.db import new_id
from switchyard.platform.http.errors import NotFound
from switchyard.platform.models import Credit, Tenant, utc_now

__all__ = ["grant_credit", "list_credits"]


def _public(row: Credit) -> CreditPublic:
    return CreditPublic(
        id=row.id,
        tenant_id=row.tenant_id,
        amount_minor=row.amount_minor,
        currency=row.currency,
        reason=row.reason,
        granted_by=row.granted_by,
        created_at=row.created_at,
        applied=row.invoice_line_id is not None,
    )


async def _tenant(session: AsyncSession, tenant_id: str) -> Tenant:
    tenant = await session.get(Tenant, tenant_id)
    if tenant is None:
        raise NotFound(f"no tenant {tenant_id!r}", param="tenant_id")
    return tenant


async def grant_credit(session: AsyncSession, *, tenant_id: str, actor: Actor, data: CreditGrant) -> CreditPublic:
    """Record a credit (an operator action: unscoped session); the tenant's draft for this month shows it."""
    await _tenant(session, tenant_id)
    row = Credit(
        id=new_id("cred"),
        tenant_id=tenant_id,
        amount_minor=data.amount_minor,
        currency=data.currency,
        reason=data.reason,
        granted_by=actor.key_id,
    )
    session.add(row)
    await ensure_drafts(session, [(tenant_id, utc_now())])
    record(
        session,
        tenant_id=tenant_id,
        actor=actor,
        action="credit.grant",
        target_type="credit",
        target_id=row.id,
        details={"amount_minor": data.amount_minor, "currency": data.currency, "reason": data.reason},
        by_operator=True,
    )
    await session.flush()
    return _public(row)


async def list_credits(session: AsyncSession, *, tenant_id: str) -> list[CreditPublic]:
    await _tenant(session, tenant_id)
    rows = await session.execute(select(Credit).where(col(Credit.tenant_id) == tenant_id).order_by(col(Credit.id)))
    return [_public(row) for row in rows.scalars()]
