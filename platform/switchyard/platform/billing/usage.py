"""Usage reports read straight from the ledger (the same rows invoices are built from).

Buckets are whole UTC hours (``1h``) or days (``1d``); a window's start is rounded down to a bucket edge.
Every usage event carries its ``hour_start``, so grouping is portable SQL: hours come from the database,
days are folded from hours here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.models import UsageEvent

__all__ = ["GROUP_BY_FIELDS", "MAX_BUCKETS", "BucketWidth", "UsageBucket", "UsageRow", "bucket_edges", "read_usage"]

BucketWidth = Literal["1h", "1d"]
GROUP_BY_FIELDS = ("agent_id", "workflow_id", "api_key_id", "model", "instance_type")
MAX_BUCKETS = 10_000
_WIDTHS = {"1h": timedelta(hours=1), "1d": timedelta(days=1)}


@dataclass
class UsageRow:
    """Totals of one group in one bucket."""

    group: dict[str, str | None]
    chip_us: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    num_model_requests: int = 0


@dataclass
class UsageBucket:
    start: datetime
    end: datetime
    rows: list[UsageRow] = field(default_factory=list)


def _floor(at: datetime, width: BucketWidth) -> datetime:
    at = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return at.replace(hour=0) if width == "1d" else at


def bucket_edges(start: datetime, end: datetime, width: BucketWidth) -> list[datetime]:
    """Bucket starts covering ``[start, end)``, the first rounded down to a bucket edge."""
    step = _WIDTHS[width]
    edges = []
    at = _floor(start, width)
    while at < end:
        edges.append(at)
        at += step
        if len(edges) > MAX_BUCKETS:
            raise ValueError(f"more than {MAX_BUCKETS} buckets: narrow the window or widen the buckets")
    return edges


async def read_usage(
    session: AsyncSession,
    *,
    scope: TenantScope,
    start: datetime,
    end: datetime,
    width: BucketWidth,
    group_by: Sequence[str] = (),
) -> list[UsageBucket]:
    """Usage of the tenant in buckets over ``[start, end)`` (empty buckets included), grouped as asked."""
    edges = bucket_edges(start, end, width)
    if not edges:
        return []
    columns: list[Any] = [getattr(UsageEvent, name) for name in group_by]
    statement = (
        select(
            col(UsageEvent.hour_start),
            *columns,
            func.sum(col(UsageEvent.chip_us)),
            func.sum(col(UsageEvent.prompt_tokens)),
            func.sum(col(UsageEvent.completion_tokens)),
            func.count(),
        )
        .where(
            col(UsageEvent.tenant_id) == scope.tenant_id,
            col(UsageEvent.hour_start) >= edges[0],
            col(UsageEvent.hour_start) < end,
        )
        .group_by(col(UsageEvent.hour_start), *columns)
    )
    step = _WIDTHS[width]
    buckets = {edge: UsageBucket(edge, edge + step) for edge in edges}
    found: dict[tuple[datetime, tuple[Any, ...]], UsageRow] = {}
    for record in await session.execute(statement):
        hour, *values = record
        group_values, (chip_us, prompt, completion, count) = tuple(values[: len(columns)]), values[len(columns) :]
        edge = _floor(hour, width)
        if edge not in buckets:
            continue
        row = found.get((edge, group_values))
        if row is None:
            row = UsageRow(dict(zip(group_by, group_values, strict=True)))
            found[(edge, group_values)] = row
            buckets[edge].rows.append(row)
        row.chip_us += int(chip_us)
        row.input_tokens += int(prompt)
        row.output_tokens += int(completion)
        row.num_model_requests += int(count)
    for bucket in buckets.values():
        bucket.rows.sort(key=lambda r: tuple(str(v) for v in r.group.values()))
    return [buckets[edge] for edge in edges]
