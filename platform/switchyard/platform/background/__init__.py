"""Background work on the workers: runs and background responses, served to tenants in turn (``tasks``)."""

from __future__ import annotations

__all__: list[str] = []
