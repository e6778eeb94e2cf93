"""Database access: engines, sessions, tenant scoping, ids and migrations."""

from __future__ import annotations

from switchyard.platform.db.engine import Database, async_url, sync_url
from switchyard.platform.db.ids import new_id
from switchyard.platform.db.scope import UNSCOPED, MissingTenantScope, TenantScope, scope_session

__all__ = [
    "UNSCOPED",
    "Database",
    "MissingTenantScope",
    "TenantScope",
    "async_url",
    "new_id",
    "scope_session",
    "sync_url",
]
