"""Bounds on the size of what a tenant defines (specs are validated on the event loop every tenant shares)."""

from __future__ import annotations

from typing import Any

__all__ = ["checked_metadata", "schema_nodes"]


def checked_metadata(value: dict[str, str]) -> dict[str, str]:
    """``value`` if its keys are at most 64 characters and its values at most 512 (a spec's ``metadata``)."""
    for key, item in value.items():
        if len(key) > 64 or len(item) > 512:
            raise ValueError("metadata keys are at most 64 characters and values at most 512")
    return value


def schema_nodes(value: Any, *, past: int) -> int:
    """How many JSON values ``value`` holds (itself, and every member and item, nested), counting stopped once
    past ``past``."""
    count, pending = 0, [value]
    while pending and count <= past:
        item = pending.pop()
        count += 1
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return count
