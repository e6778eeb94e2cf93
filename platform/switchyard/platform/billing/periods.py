"""Billing periods: calendar months in UTC, half-open ``[start, end)``."""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["hour_start", "month_end", "month_start", "next_month", "parse_period", "period_label"]

_PERIOD = re.compile(r"^(\d{4})-(\d{2})$")


def _utc(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise ValueError("naive datetimes are not accepted; use UTC-aware values")
    return at.astimezone(UTC)


def month_start(at: datetime) -> datetime:
    """First instant of the UTC month containing ``at``."""
    at = _utc(at)
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def next_month(start: datetime) -> datetime:
    """First instant of the month after the one starting ``start``."""
    start = month_start(start)
    return datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=UTC)


def month_end(at: datetime) -> datetime:
    """Exclusive end of the UTC month containing ``at``."""
    return next_month(month_start(at))


def hour_start(at: datetime) -> datetime:
    """``at`` truncated to the hour, in UTC."""
    return _utc(at).replace(minute=0, second=0, microsecond=0)


def parse_period(text: str) -> datetime:
    """``"2026-11"`` → 2026-11-01T00:00Z; raises ``ValueError`` on anything else."""
    match = _PERIOD.match(text)
    if match is None or not 1 <= int(match.group(2)) <= 12:
        raise ValueError(f"a period is written YYYY-MM, not {text!r}")
    return datetime(int(match.group(1)), int(match.group(2)), 1, tzinfo=UTC)


def period_label(start: datetime) -> str:
    """``2026-11-01T00:00Z`` → ``"2026-11"``."""
    start = _utc(start)
    return f"{start.year:04d}-{start.month:02d}"
