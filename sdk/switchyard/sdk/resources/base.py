"""What every resource holds: its client; and how ids go into paths."""

from __future__ import annotations

from urllib.parse import quote

from switchyard.sdk.transport import AsyncTransport, SyncTransport

__all__ = ["AsyncResource", "SyncResource", "segment"]


def segment(object_id: str) -> str:
    """An id as one path segment (a stray ``/`` cannot reach another route)."""
    return quote(object_id, safe="")


class SyncResource:
    def __init__(self, client: SyncTransport) -> None:
        self._client = client


class AsyncResource:
    def __init__(self, client: AsyncTransport) -> None:
        self._client = client
