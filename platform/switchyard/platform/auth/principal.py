"""Who is calling: resolved once per request by the authentication middleware."""

from __future__ import annotations

from dataclasses import dataclass

from switchyard.platform.auth.roles import Role
from switchyard.platform.db.scope import TenantScope

__all__ = ["Actor", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified API key: a tenant key (with ``scope`` and ``role``) or an operator key."""

    key_id: str
    scope: TenantScope | None
    role: Role | None

    @property
    def is_operator(self) -> bool:
        return self.scope is None

    @property
    def tenant_role(self) -> Role:
        """The role of a tenant key (routes with a role guard only ever see tenant keys)."""
        if self.role is None:
            raise RuntimeError("operator keys have no tenant role")
        return self.role


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change and in which request, for the audit log."""

    key_id: str
    request_id: str | None
