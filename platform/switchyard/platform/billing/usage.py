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

from switchyard.platform.billing.costs import Pricer
from switchyard.platform.db import TenantScope
from switchyard.platform.models import UsageEvent, utc_now

__all__ = [
    "GROUP_BY_FIELDS",
    "MAX_BUCKETS",
    "BucketWidth",
    "UsageBucket",
    "UsageRow",
    "bucket_edges",
    "read_usage",
    "totals",
]

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
    input_cached_tokens: int = 0
    cache_saved_chip_us: int = 0
    """What computing the cached tokens would have cost beyond reading them (an estimate; not in ``chip_us``)."""
    num_model_requests: int = 0
    cost_micros: dict[str, int] = field(default_factory=dict)
    """What the usage costs, in micro-units by currency (``priced`` reports only; see ``costs``)."""


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
    priced: bool = False,
) -> list[UsageBucket]:
    """Usage of the tenant in buckets over ``[start, end)`` (empty buckets included), grouped as asked; with
    ``priced``, each row's ``cost_micros`` too."""
    edges = bucket_edges(start, end, width)
    if not edges:
        return []
    columns: list[Any] = [getattr(UsageEvent, name) for name in group_by]
    pricing: list[Any] = [
        col(UsageEvent.instance_type),
        col(UsageEvent.model),
        col(UsageEvent.price_per_chip_hour),
        col(UsageEvent.currency),
    ]
    pricer = Pricer(session, tenant_id=scope.tenant_id, now=utc_now()) if priced else None
    statement = (
        select(
            col(UsageEvent.hour_start),
            *columns,
            *(pricing if priced else ()),
            func.sum(col(UsageEvent.chip_us)),
            func.sum(col(UsageEvent.prompt_tokens)),
            func.sum(col(UsageEvent.completion_tokens)),
            func.sum(col(UsageEvent.cached_tokens)),
            func.sum(col(UsageEvent.cache_saved_chip_us)),
            func.count(),
        )
        .where(
            col(UsageEvent.tenant_id) == scope.tenant_id,
            col(UsageEvent.hour_start) >= edges[0],
            col(UsageEvent.hour_start) < end,
        )
        .group_by(col(UsageEvent.hour_start), *columns, *(pricing if priced else ()))
    )
    step = _WIDTHS[width]
    buckets = {edge: UsageBucket(edge, edge + step) for edge in edges}
    found: dict[tuple[datetime, tuple[Any, ...]], UsageRow] = {}
    for record in await session.execute(statement):
        hour, *values = record
        group_values, values = tuple(values[: len(columns)]), values[len(columns) :]
        prices, (chip_us, prompt, completion, cached, saved, count) = values[:-6], values[-6:]
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
        row.input_cached_tokens += int(cached)
        row.cache_saved_chip_us += int(saved)
        row.num_model_requests += int(count)
        if pricer is not None:
            instance_type, model, rated_at, rated_in = prices
            price = await pricer.price(instance_type=instance_type, model=model, rated_at=rated_at, rated_in=rated_in)
            if price is not None:
                row.cost_micros[price.currency] = row.cost_micros.get(price.currency, 0) + price.of(int(chip_us))
    for bucket in buckets.values():
        bucket.rows.sort(key=lambda r: tuple(str(v) for v in r.group.values()))
    return [buckets[edge] for edge in edges]


def totals(
    buckets: Sequence[UsageBucket], group_by: Sequence[str] | None = None
) -> dict[tuple[str | None, ...], UsageRow]:
    """Rows summed over ``buckets`` by their values of ``group_by`` (default: the groups they were read with;
    ``()``: one row of everything)."""
    summed: dict[tuple[str | None, ...], UsageRow] = {}
    for bucket in buckets:
        for row in bucket.rows:
            fields = row.group.keys() if group_by is None else group_by
            group = {name: row.group.get(name) for name in fields}
            total = summed.setdefault(tuple(group.values()), UsageRow(group))
            total.chip_us += row.chip_us
            total.input_tokens += row.input_tokens
            total.output_tokens += row.output_tokens
            total.input_cached_tokens += row.input_cached_tokens
            total.cache_saved_chip_us += row.cache_saved_chip_us
            total.num_model_requests += row.num_model_requests
            for currency, micros in row.cost_micros.items():
                total.cost_micros[currency] = total.cost_micros.get(currency, 0) + micros
    return summed
