"""Bounds on the times the API accepts: aware datetimes in bodies, Unix seconds in query parameters.

Python's ``datetime`` ends at year 9999, so a time near that edge overflows as soon as something converts it
to UTC or adds a month or a bucket to it (``ValueError: year 10000 is out of range``: a 500). Every time a
client sends is therefore held to ``[EARLIEST, LATEST]``, far from both edges, and a datetime must carry
its timezone (comparing a naive one with the aware times stored raises ``TypeError``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime

__all__ = ["EARLIEST", "LATEST", "MAX_UNIX_SECONDS", "UtcDatetime"]

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
MAX_UNIX_SECONDS = int(LATEST.timestamp())
"""The largest Unix time a query parameter may carry: 9999-01-01T00:00:00Z."""


def _within_bounds(value: datetime) -> datetime:
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        raise ValueError(f"must be between {EARLIEST:%Y-%m-%dT%H:%M:%SZ} and {LATEST:%Y-%m-%dT%H:%M:%SZ}")
    return utc


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_within_bounds)]
"""A datetime with a timezone (naive ones are refused), between ``EARLIEST`` and ``LATEST``, given back in UTC."""
