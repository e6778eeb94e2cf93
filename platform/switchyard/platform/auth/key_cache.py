"""A short-lived in-process cache of what the database holds of keys, so the hot path does not read it per request.

Entries live ``ttl_s`` seconds (``SWITCHYARD_AUTH_CACHE_SECONDS``; 0 turns the cache off) and are refreshed ahead of
their expiry while a key is in use, one read per key however many requests miss it at once (``RefreshAheadCache``).
Revoking a key in a process forgets it there at once; other API processes stop accepting it within ``ttl_s``. A
request's secret, the key's expiry and its revocation are checked on every use, cached or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial

from sqlalchemy import select
from sqlmodel import col

from switchyard.platform.auth.principal import Principal
from switchyard.platform.auth.roles import Role
from switchyard.platform.db import UNSCOPED, Database, TenantScope, scope_session
from switchyard.platform.models import ApiKey, OperatorKey, Tenant
from switchyard.platform.refresh_ahead import RefreshAheadCache

__all__ = ["KeyCache", "KeyRecord", "read_key"]


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What the database holds of a key: enough to verify a request's secret, or to refuse it, without a read."""

    principal: Principal
    secret_sha256: str
    expires_at: datetime | None
    revoked: bool
    tenant_suspended: bool


async def read_key(database: Database, short_id: str) -> KeyRecord | None:
    """The key named ``short_id`` (an operator key's starts with ``op``); None when there is none."""
    async with database.session() as session:
        scope_session(session, UNSCOPED)  # the key decides the tenant, so the lookup cannot be scoped
        table = OperatorKey if short_id.startswith("op") else ApiKey
        row = (await session.execute(select(table).where(col(table.short_id) == short_id))).scalar_one_or_none()
        tenant = await session.get(Tenant, row.tenant_id) if isinstance(row, ApiKey) else None
    if row is None:
        return None
    if isinstance(row, ApiKey):
        principal = Principal(key_id=row.id, scope=TenantScope(row.tenant_id), role=Role(row.role))
    else:
        principal = Principal(key_id=row.id, scope=None, role=None)
    suspended = tenant is not None and tenant.suspended_at is not None
    return KeyRecord(principal, row.secret_sha256, row.expires_at, row.revoked_at is not None, suspended)


class KeyCache:
    def __init__(self, ttl_s: float, database: Database) -> None:
        self.ttl_s = ttl_s
        self._records: RefreshAheadCache[str, KeyRecord | None] = RefreshAheadCache(ttl_s, partial(read_key, database))

    async def get(self, short_id: str) -> KeyRecord | None:
        """The key's record, read from the database unless a fresh one is cached. Only usable keys stay cached: an
        unknown, revoked or suspended key is read again by the next request (a reactivated tenant's keys work at
        once), though requests that miss it together still share one read."""
        record = await self._records.get(short_id)
        if record is None or record.revoked or record.tenant_suspended:
            self._records.forget(short_id)
        return record

    def forget(self, short_id: str) -> None:
        self._records.forget(short_id)

    async def drain(self) -> None:
        """Wait for the key reads under way (before the database closes)."""
        await self._records.drain()
