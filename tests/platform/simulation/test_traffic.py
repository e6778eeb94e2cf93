"""A tenant's usage ledger read back as a simulator workload (``simulation.traffic``), on a real database (SQLite,
and PostgreSQL when the suite has it): one request per answered request of one model, in arrival order, only the
tenant's own, sampled evenly to the limit at the recorded rate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from switchyard.platform.billing.ledger import UsageEventCreate, record_usage_bulk
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.simulation.traffic import models_with_traffic, recorded_workload
from tests.platform.billing.factories import receipt

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
OTHER = "meta-llama/Llama-3.3-70B-Instruct"
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SINCE, UNTIL = START - timedelta(days=1), START + timedelta(days=6)


async def _record(database: Database, tenant_id: str, *events: UsageEventCreate) -> None:
    scope = TenantScope(tenant_id)
    async with database.unit_of_work(scope) as session:
        await record_usage_bulk(session, scope=scope, events=list(events))


async def _workload(database: Database, tenant_id: str, **options: Any) -> Any:
    async with database.unit_of_work(UNSCOPED) as session:  # the operator's unscoped session
        return await recorded_workload(
            session, scope=TenantScope(tenant_id), since=options.pop("since", SINCE), until=UNTIL, **options
        )


async def test_each_answered_request_becomes_one_simulated_request_in_arrival_order(
    client: Any, make_tenant: Any
) -> None:
    database: Database = client.app.state.database
    tenant, neighbour = await make_tenant(), await make_tenant()
    at = START + timedelta(hours=1)
    await _record(
        database,
        tenant.id,
        receipt(model=MODEL, occurred_at=at + timedelta(seconds=5), prompt_tokens=900, completion_tokens=30),
        receipt(model=MODEL, occurred_at=at, prompt_tokens=1200, completion_tokens=80, run_id="run_1"),
        receipt(model=MODEL, occurred_at=at + timedelta(seconds=2), prompt_tokens=300, completion_tokens=10),
        receipt(model=MODEL, occurred_at=at + timedelta(seconds=3), prompt_tokens=40, completion_tokens=0),  # none
        receipt(model=OTHER, occurred_at=at + timedelta(seconds=1), prompt_tokens=50, completion_tokens=5),
        receipt(model=MODEL, occurred_at=SINCE - timedelta(seconds=1), completion_tokens=7),  # before the period
        receipt(model=MODEL, occurred_at=UNTIL, completion_tokens=7),  # the period's end is not in it
    )
    await _record(database, neighbour.id, receipt(model=MODEL, occurred_at=at + timedelta(seconds=4)))

    workload = await _workload(database, tenant.id, model=MODEL)

    assert workload.model == MODEL
    assert workload.recorded == 3
    assert not workload.sampled
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in workload.requests] == [
        (0.0, 1200, 80),
        (2.0, 300, 10),
        (5.0, 900, 30),
    ]
    assert [r.request_id for r in workload.requests] == [0, 1, 2]
    assert workload.requests[0].session == "run_1"  # an agent run's model steps are one session
    assert (workload.first_at, workload.last_at) == (at, at + timedelta(seconds=5))
    assert workload.mean_prompt_tokens == pytest.approx(800.0)
    assert workload.mean_output_tokens == pytest.approx(40.0)
    assert workload.rate_rps == pytest.approx(2 / 5)
    assert workload.searchable


async def test_the_default_model_is_the_one_the_tenant_called_most_in_the_period(client: Any, make_tenant: Any) -> None:
    database: Database = client.app.state.database
    tenant = await make_tenant()
    at = START + timedelta(hours=2)
    await _record(
        database,
        tenant.id,
        *[receipt(model=OTHER, occurred_at=at + timedelta(seconds=i)) for i in range(2)],
        *[receipt(model=MODEL, occurred_at=at + timedelta(seconds=i)) for i in range(3)],
        *[receipt(model=OTHER, occurred_at=SINCE - timedelta(hours=i + 1)) for i in range(5)],  # an older period
        receipt(model="BAAI/bge-large-en-v1.5", occurred_at=at, completion_tokens=0),  # an embedding: no answer
    )
    async with database.unit_of_work(UNSCOPED) as session:
        ranked = await models_with_traffic(session, scope=TenantScope(tenant.id), since=SINCE, until=UNTIL)
    assert [(m.model, m.requests) for m in ranked] == [(MODEL, 3), (OTHER, 2)]
    assert (await _workload(database, tenant.id)).model == MODEL
    older = await _workload(database, tenant.id, since=SINCE - timedelta(days=1))
    assert (older.model, older.recorded) == (OTHER, 7)


async def test_a_busy_period_is_sampled_evenly_to_the_limit_and_arrives_at_the_recorded_rate(
    client: Any, make_tenant: Any
) -> None:
    database: Database = client.app.state.database
    tenant = await make_tenant()
    events = [
        receipt(
            model=MODEL,
            occurred_at=START + timedelta(seconds=2 * i + (i % 3) * 0.5),
            prompt_tokens=100 + i,
            completion_tokens=1 + i,
        )
        for i in range(53)
    ]
    await _record(database, tenant.id, *reversed(events))

    workload = await _workload(database, tenant.id, model=MODEL, limit=10)

    assert workload.recorded == 53
    assert workload.sampled
    assert len(workload.requests) == 9  # every sixth of 53, the first included
    assert [r.prompt_tokens for r in workload.requests] == [100 + 6 * k for k in range(9)]
    assert workload.mean_prompt_tokens == pytest.approx(100 + 26)  # the averages are every request's
    assert workload.mean_output_tokens == pytest.approx(1 + 26)
    span_s = workload.requests[-1].arrival_s
    assert (len(workload.requests) - 1) / span_s == pytest.approx(workload.rate_rps)
    assert workload.rate_rps == pytest.approx(52 / (2 * 52 + 0.5))
    arrivals = [r.arrival_s for r in workload.requests]
    assert arrivals == sorted(arrivals)
    assert arrivals[0] == 0.0


async def test_a_tenant_without_traffic_has_no_workload_and_one_request_is_too_little(
    client: Any, make_tenant: Any
) -> None:
    database: Database = client.app.state.database
    quiet, lone = await make_tenant(), await make_tenant()
    await _record(database, lone.id, receipt(model=MODEL, occurred_at=START))
    assert await _workload(database, quiet.id) is None
    assert await _workload(database, quiet.id, model=MODEL) is None
    assert await _workload(database, lone.id, model=OTHER) is None
    single = await _workload(database, lone.id)
    assert single.recorded == 1
    assert single.rate_rps == 0.0
    assert not single.searchable
    with pytest.raises(ValueError, match="two requests"):
        await _workload(database, lone.id, limit=1)
