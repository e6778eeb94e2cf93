"""Tenancy as a type, enforced by the session.

A session carries one ``TenantScope`` (``session.info["scope"]``) or is explicitly ``unscoped`` (operator and
system work). Every ORM statement that touches a ``TenantOwned`` table gets ``tenant_id = <scope>`` added,
every new row must belong to the scope's tenant, and a statement with neither a scope nor an explicit
``unscoped`` is refused with ``MissingTenantScope``.

On PostgreSQL, row-level security is the second layer (migration 0005): each transaction of a tenant-scoped
session runs as the role ``switchyard_tenant`` with ``switchyard.tenant_id`` set to the scope, and the policies
of the tenant-owned tables then hide and refuse every other tenant's rows, raw SQL included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, event, text
from sqlalchemy.orm import ORMExecuteState, Session, SessionTransaction, with_loader_criteria
from sqlmodel import col

from switchyard.platform.models import TenantOwned

__all__ = ["PG_TENANT_ROLE", "UNSCOPED", "MissingTenantScope", "ScopedSession", "TenantScope", "scope_session"]

PG_TENANT_ROLE = "switchyard_tenant"
_PG_ENTER_TENANT = text("SELECT set_config('role', :role, true), set_config('switchyard.tenant_id', :tenant, true)")


@dataclass(frozen=True, slots=True)
class TenantScope:
    """The caller's tenant, resolved once at the edge (from the API key) and required by tenant repositories."""

    tenant_id: str


class _Unscoped:
    def __repr__(self) -> str:
        return "UNSCOPED"


UNSCOPED: Any = _Unscoped()
"""Marks a session that deliberately works across tenants (operator routes, auth lookups, jobs)."""


class MissingTenantScope(RuntimeError):
    """A tenant-owned table was queried or written without a tenant scope."""


class ScopedSession(Session):
    """The sync session class behind every ``AsyncSession`` of the platform."""


def scope_session(session: Any, scope: TenantScope | _Unscoped) -> None:
    """Attach a scope to a session (sync or async) before its first statement."""
    target = getattr(session, "sync_session", session)
    target.info["scope"] = scope


def _tenant_owned_classes(state: ORMExecuteState) -> list[type[TenantOwned]]:
    mappers = state.all_mappers if state.is_select else [state.bind_mapper]
    return [m.class_ for m in mappers if m is not None and issubclass(m.class_, TenantOwned)]


@event.listens_for(ScopedSession, "do_orm_execute")
def _apply_tenant_scope(state: ORMExecuteState) -> None:
    if not (state.is_select or state.is_update or state.is_delete):
        return
    owned = _tenant_owned_classes(state)
    if not owned:
        return
    scope = state.session.info.get("scope")
    if scope is UNSCOPED:
        return
    if not isinstance(scope, TenantScope):
        raise MissingTenantScope("query on a tenant-owned table without a tenant scope")
    criteria = [
        with_loader_criteria(table, col(table.tenant_id) == scope.tenant_id, include_aliases=True) for table in owned
    ]
    state.statement = state.statement.options(*criteria)


@event.listens_for(ScopedSession, "before_flush")
def _check_new_rows(session: Session, _context: Any, _instances: Any) -> None:
    scope = session.info.get("scope")
    if scope is UNSCOPED:
        return
    for obj in list(session.new) + list(session.dirty) + list(session.deleted):
        if not isinstance(obj, TenantOwned):
            continue
        if not isinstance(scope, TenantScope):
            raise MissingTenantScope(f"write to {type(obj).__name__} without a tenant scope")
        if obj.tenant_id != scope.tenant_id:
            raise MissingTenantScope(f"write to {type(obj).__name__} of another tenant")


@event.listens_for(ScopedSession, "after_begin")
def _enter_tenant_on_postgres(session: Session, _transaction: SessionTransaction, connection: Connection) -> None:
    scope = session.info.get("scope")
    if isinstance(scope, TenantScope) and connection.dialect.name == "postgresql":
        connection.execute(_PG_ENTER_TENANT, {"role": PG_TENANT_ROLE, "tenant": scope.tenant_id})
