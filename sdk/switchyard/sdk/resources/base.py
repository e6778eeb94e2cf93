"""What every resource holds: its client; and how ids go into paths."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from switchyard.sdk.client import AsyncSwitchyard, Switchyard

__all__ = ["AsyncResource", "SyncResource", "segment"]


def segment(object_id: str) -> str:
    """An id as one path segment (a stray ``/`` cannot reach another route)."""
    return quote(object_id, safe="")


class SyncResource:
    def __init__(self, client: Switchyard) -> None:
        self._client = client


class AsyncResource:
    def __init__(self, client: AsyncSwitchyard) -> None:
        self._client = client
