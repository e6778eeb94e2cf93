"""A short-lived in-process cache of verified keys, so the hot path does not read the database per request.

Entries live ``ttl_s`` seconds (``SWITCHYARD_AUTH_CACHE_SECONDS``; 0 turns the cache off). Revoking a key in a
process forgets it there at once; other API processes stop accepting it within ``ttl_s``. Expiry is checked
on every use, cached or not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from switchyard.platform.auth.principal import Principal

__all__ = ["CachedKey", "KeyCache"]


@dataclass(frozen=True, slots=True)
class CachedKey:
    principal: Principal
    secret_sha256: str
    expires_at: datetime | None
    cached_until: float


class KeyCache:
    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, CachedKey] = {}

    def get(self, short_id: str) -> CachedKey | None:
        entry = self._entries.get(short_id)
        if entry is None:
            return None
        if entry.cached_until <= time.monotonic():
            del self._entries[short_id]
            return None
        return entry

    def put(self, short_id: str, principal: Principal, secret_sha256: str, expires_at: datetime | None) -> None:
        if self.ttl_s <= 0:
            return
        if len(self._entries) > 50_000:
            self._entries.clear()
        self._entries[short_id] = CachedKey(principal, secret_sha256, expires_at, time.monotonic() + self.ttl_s)

    def forget(self, short_id: str) -> None:
        self._entries.pop(short_id, None)
