"""What the operator's pages read: every tenant's members, compute this month and open credits, and the fleet.

Reads across tenants, so they take the request's unscoped session (an operator's). Money is computed as an invoice
computes it (``billing.money.cost_minor``: the sum of chip-µs × price, rounded once per currency).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.money import cost_minor
from switchyard.platform.billing.periods import month_start
from switchyard.platform.models import Credit, Member, Tenant, UsageEvent, utc_now

__all__ = ["FleetReplica", "TenantSummary", "fleet_replicas", "tenant_page", "tenant_summary"]

TENANTS_PER_PAGE = 100


@dataclass(frozen=True, slots=True)
class TenantSummary:
    """One tenant as the operator's list shows it."""

    id: str
    name: str
    created_at: datetime
    members: int
    month_chip_us: int
    month_cost_minor: dict[str, int] = field(default_factory=dict)
    """Rated usage this month by currency (usage not rated yet counts in chip-µs only)."""
    credit_balance_minor: dict[str, int] = field(default_factory=dict)
    """Credits granted and not yet taken by a finalized invoice, by currency."""
    suspended_at: datetime | None = None

    @property
    def status(self) -> str:
        """``suspended`` by an operator; else ``active`` with compute this month, ``idle`` without."""
        if self.suspended_at is not None:
            return "suspended"
        return "active" if self.month_chip_us > 0 else "idle"


async def tenant_page(
    session: AsyncSession, *, name: str | None = None, after: str | None = None, now: datetime | None = None
) -> tuple[list[TenantSummary], bool]:
    """A page of tenants, newest first, after the tenant ``after`` (the previous page's last) and with ``name`` in
    their name (any case) when given; and whether more follow."""
    newest_first = (col(Tenant.created_at).desc(), col(Tenant.id).desc())
    statement = select(Tenant).order_by(*newest_first).limit(TENANTS_PER_PAGE + 1)
    anchor = await session.get(Tenant, after) if after else None
    if anchor is not None:
        statement = statement.where(
            or_(
                col(Tenant.created_at) < anchor.created_at,
                and_(col(Tenant.created_at) == anchor.created_at, col(Tenant.id) < anchor.id),
            )
        )
    if name:
        escaped = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        statement = statement.where(col(Tenant.name).ilike(f"%{escaped}%", escape="\\"))
    tenants = list((await session.execute(statement)).scalars())
    return await _summaries(session, tenants[:TENANTS_PER_PAGE], now), len(tenants) > TENANTS_PER_PAGE


async def tenant_summary(session: AsyncSession, tenant_id: str, now: datetime | None = None) -> TenantSummary | None:
    """One tenant with its members, this month's compute and credits; None when there is no such tenant."""
    tenant = await session.get(Tenant, tenant_id)
    return (await _summaries(session, [tenant], now))[0] if tenant is not None else None


async def _summaries(session: AsyncSession, tenants: list[Tenant], now: datetime | None) -> list[TenantSummary]:
    """``tenants`` with their members, this month's compute and open credits (read for these tenants only)."""
    ids = [tenant.id for tenant in tenants]
    if not ids:
        return []
    period = month_start(now or utc_now())
    members = (
        select(col(Member.tenant_id), func.count())
        .where(col(Member.tenant_id).in_(ids))
        .group_by(col(Member.tenant_id))
    )
    usage = (
        select(
            col(UsageEvent.tenant_id),
            col(UsageEvent.currency),
            col(UsageEvent.price_per_chip_hour),
            func.sum(col(UsageEvent.chip_us)),
        )
        .where(col(UsageEvent.period_start) == period, col(UsageEvent.tenant_id).in_(ids))
        .group_by(col(UsageEvent.tenant_id), col(UsageEvent.currency), col(UsageEvent.price_per_chip_hour))
    )
    open_credits = (
        select(col(Credit.tenant_id), col(Credit.currency), func.sum(col(Credit.amount_minor)))
        .where(col(Credit.invoice_line_id).is_(None), col(Credit.tenant_id).in_(ids))
        .group_by(col(Credit.tenant_id), col(Credit.currency))
    )
    member_counts = {tid: int(n) for tid, n in (await session.execute(members)).all()}
    chip_us: dict[str, int] = defaultdict(int)
    priced: dict[str, dict[str, list[tuple[int, Decimal]]]] = defaultdict(lambda: defaultdict(list))
    for tid, currency, price, total in (await session.execute(usage)).all():
        chip_us[tid] += int(total or 0)
        if currency is not None and price is not None:
            priced[tid][currency].append((int(total or 0), Decimal(price)))
    credits: dict[str, dict[str, int]] = defaultdict(dict)
    for tid, currency, total in (await session.execute(open_credits)).all():
        credits[tid][currency] = int(total or 0)
    return [
        TenantSummary(
            id=tenant.id,
            name=tenant.name,
            created_at=tenant.created_at,
            members=member_counts.get(tenant.id, 0),
            month_chip_us=chip_us.get(tenant.id, 0),
            month_cost_minor={c: cost_minor(items, c) for c, items in sorted(priced.get(tenant.id, {}).items())},
            credit_balance_minor=dict(sorted(credits.get(tenant.id, {}).items())),
            suspended_at=tenant.suspended_at,
        )
        for tenant in tenants
    ]


@dataclass(frozen=True, slots=True)
class FleetReplica:
    """One replica of the fleet view: its deployment's facts with the replica's own load."""

    replica: str
    model: str
    backend: str
    instance_type: str
    busy_fraction: float | None
    kv_used_fraction: float | None
    queued: int | None
    running: int | None
    chip_us: int | None
    deployment_queued: int | None
    deployment_running: int | None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def _fraction(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def fleet_replicas(deployments: list[dict[str, Any]]) -> list[FleetReplica]:
    """The fleet status (``GET /v1/admin/fleet``'s ``deployments``) as one row per replica; a deployment without
    replicas of its own (an OpenAI-compatible upstream) is one row with what it knows."""
    rows = []
    for deployment in deployments:
        model = str(deployment.get("model", ""))
        replicas = deployment.get("replicas") or [{"replica": f"{model} (upstream)"}]
        for replica in replicas:
            rows.append(
                FleetReplica(
                    replica=str(replica.get("replica", "")),
                    model=model,
                    backend=str(deployment.get("backend", "")),
                    instance_type=str(deployment.get("instance_type", "")),
                    busy_fraction=_fraction(replica.get("busy_fraction")),
                    kv_used_fraction=_fraction(replica.get("kv_used_fraction")),
                    queued=_int(replica.get("queued")),
                    running=_int(replica.get("running")),
                    chip_us=_int(replica.get("chip_us")),
                    deployment_queued=_int(deployment.get("queued")),
                    deployment_running=_int(deployment.get("running")),
                )
            )
    return rows
