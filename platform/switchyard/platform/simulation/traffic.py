"""A tenant's recorded traffic as a simulator workload: the usage ledger read back as ``Request``s.

Each usage event that produced output tokens is one answered request to one model (a chat completion, a
completion, an agent run's model step; an embedding call produces none and is left out). For one model and a
period, ``recorded_workload`` makes one ``Request`` per event: the prompt and output lengths are the event's
tokens, the arrival time its ``occurred_at`` in seconds after the period's first event, the session its run.

Bounded: at most ``limit`` requests (``MAX_REQUESTS``) are read, however much the tenant sent. Past that the
events are sampled evenly in time order (every k-th, the first included, in the database), and the sample's
arrival times are compressed so that it arrives at the recorded mean rate, (recorded - 1) / (last - first), in the
same shape. The averages (``mean_prompt_tokens``, ``mean_output_tokens``, ``rate_rps``) are those of every
recorded event, not only of the sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.accelerator.sim.requests import Request
from switchyard.platform.db import TenantScope
from switchyard.platform.models import UsageEvent, utc_now

__all__ = [
    "DEFAULT_PERIOD",
    "MAX_REQUESTS",
    "ModelTraffic",
    "RecordedWorkload",
    "models_with_traffic",
    "period_ending",
    "recorded_workload",
]

DEFAULT_PERIOD = timedelta(days=7)
MAX_REQUESTS = 200  # requests simulated at most (a search simulates each up to 13 times per configuration)


@dataclass(frozen=True, slots=True)
class ModelTraffic:
    """A model the tenant called in a period, and how many answered requests it sent it."""

    model: str
    requests: int


@dataclass(frozen=True, slots=True)
class RecordedWorkload:
    """One model's recorded requests of a tenant over ``[since, until)``, as the simulator's workload."""

    model: str
    since: datetime
    until: datetime
    recorded: int  # answered requests recorded in the period
    first_at: datetime
    last_at: datetime
    mean_prompt_tokens: float  # over every recorded request
    mean_output_tokens: float
    cached_prompt_share: float  # of the prompt tokens, those read from a prefix cache (not simulated: see the docs)
    requests: list[Request]  # at most the limit: every recorded request, or an even sample of them

    @property
    def sampled(self) -> bool:
        """Whether ``requests`` is a sample (the period holds more requests than the limit)."""
        return len(self.requests) < self.recorded

    @property
    def span_s(self) -> float:
        return (self.last_at - self.first_at).total_seconds()

    @property
    def rate_rps(self) -> float:
        """The recorded mean arrival rate (requests per second between the first and the last); 0 with one request
        or all at one instant."""
        return (self.recorded - 1) / self.span_s if self.recorded > 1 and self.span_s > 0 else 0.0

    @property
    def searchable(self) -> bool:
        """A search needs an arrival rate: two requests at least, not all at one instant."""
        return len(self.requests) >= 2 and self.requests[-1].arrival_s > self.requests[0].arrival_s


def _answered(scope: TenantScope, model: str | None, since: datetime, until: datetime) -> list[object]:
    conditions: list[object] = [
        col(UsageEvent.tenant_id) == scope.tenant_id,
        col(UsageEvent.occurred_at) >= since,
        col(UsageEvent.occurred_at) < until,
        col(UsageEvent.completion_tokens) > 0,
    ]
    if model is not None:
        conditions.append(col(UsageEvent.model) == model)
    return conditions


def period_ending(now: datetime | None = None, period: timedelta = DEFAULT_PERIOD) -> tuple[datetime, datetime]:
    """``[now - period, now)``."""
    until = now or utc_now()
    return until - period, until


async def models_with_traffic(
    session: AsyncSession, *, scope: TenantScope, since: datetime, until: datetime
) -> list[ModelTraffic]:
    """The models the tenant sent answered requests to in ``[since, until)``, most requests first."""
    count = func.count()
    statement = (
        select(col(UsageEvent.model), count)
        .where(*_answered(scope, None, since, until))  # type: ignore[arg-type]
        .group_by(col(UsageEvent.model))
        .order_by(count.desc(), col(UsageEvent.model))
    )
    return [ModelTraffic(model, int(n)) for model, n in (await session.execute(statement)).all()]


async def recorded_workload(
    session: AsyncSession,
    *,
    scope: TenantScope,
    since: datetime,
    until: datetime,
    model: str | None = None,
    limit: int = MAX_REQUESTS,
) -> RecordedWorkload | None:
    """The tenant's answered requests to ``model`` (None: its most-used model in the period) in ``[since, until)``
    as at most ``limit`` simulator requests; None when it sent none."""
    if limit < 2:
        raise ValueError("a workload sample holds two requests at least")
    if model is None:
        ranked = await models_with_traffic(session, scope=scope, since=since, until=until)
        if not ranked:
            return None
        model = ranked[0].model
    where = _answered(scope, model, since, until)
    totals = (
        await session.execute(
            select(
                func.count(),
                func.min(col(UsageEvent.occurred_at)),
                func.max(col(UsageEvent.occurred_at)),
                func.sum(col(UsageEvent.prompt_tokens)),
                func.sum(col(UsageEvent.completion_tokens)),
                func.sum(col(UsageEvent.cached_tokens)),
            ).where(*where)  # type: ignore[arg-type]
        )
    ).one()
    recorded = int(totals[0] or 0)
    if recorded == 0:
        return None
    first_at, last_at = _aware(totals[1]), _aware(totals[2])
    prompt_sum, output_sum, cached_sum = (int(v or 0) for v in totals[3:])
    step = math.ceil(recorded / limit)  # every step-th request, the first included: at most `limit`
    position = func.row_number().over(order_by=(col(UsageEvent.occurred_at), col(UsageEvent.id))).label("position")
    numbered = (
        select(
            col(UsageEvent.occurred_at),
            col(UsageEvent.prompt_tokens),
            col(UsageEvent.completion_tokens),
            col(UsageEvent.run_id),
            position,
        )
        .where(*where)  # type: ignore[arg-type]
        .subquery()
    )
    statement = select(numbered).order_by(numbered.c.position)
    if step > 1:
        statement = statement.where((numbered.c.position - 1) % step == 0)
    rows = (await session.execute(statement.limit(limit))).all()  # the limit holds if more arrived since the count
    if not rows:
        return None
    # A sample of n spread over (nearly) the recorded span arrives about (recorded - 1) / (n - 1) times slower than
    # the traffic did: compress its span to (n - 1) / rate, so that it arrives at the recorded mean rate.
    sample_span_s = (_aware(rows[-1][0]) - _aware(rows[0][0])).total_seconds()
    full_span_s = (last_at - first_at).total_seconds()
    compress = 1.0
    if step > 1 and sample_span_s > 0:
        compress = (len(rows) - 1) * full_span_s / (recorded - 1) / sample_span_s
    start = _aware(rows[0][0])
    requests = [
        Request(
            request_id=i,
            arrival_s=(_aware(occurred_at) - start).total_seconds() * compress,
            prompt_tokens=max(1, int(prompt_tokens)),
            output_tokens=int(completion_tokens),
            session=run_id,
        )
        for i, (occurred_at, prompt_tokens, completion_tokens, run_id, _) in enumerate(rows)
    ]
    return RecordedWorkload(
        model=model,
        since=since,
        until=until,
        recorded=recorded,
        first_at=first_at,
        last_at=last_at,
        mean_prompt_tokens=prompt_sum / recorded,
        mean_output_tokens=output_sum / recorded,
        cached_prompt_share=cached_sum / prompt_sum if prompt_sum else 0.0,
        requests=requests,
    )


def _aware(value: datetime | str) -> datetime:
    """A timestamp of an aggregate: SQLite answers ``min``/``max`` of a UTC column as text, naive."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
