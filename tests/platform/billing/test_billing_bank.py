"""The "bank" test: 8 processes spend against 50 hard budgets at once; admitted spend never exceeds a budget.

Each process reserves a random estimate against one of 50 API-key budgets (and the tenant's budget, so
reservations span two rows), then settles to a random actual at most the estimate, or releases. Afterwards:
no budget's settled spend exceeds its limit, nothing is left held, and every budget's spend equals the sum of
the settled reservations charged to it (nothing lost or double-counted), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from switchyard.platform.billing.budgets import limit_micros
from switchyard.platform.db import Database, new_id
from switchyard.platform.models import Budget, BudgetReservation
from tests.conftest import REPO_ROOT

PROCESSES = 8
BUDGETS = 50
ITERATIONS = 60


@pytest.mark.slow
async def test_admitted_spend_never_exceeds_a_hard_budget(
    database: Database, database_url: str, new_tenant: Any
) -> None:
    scope = await new_tenant()
    keys = [f"key_bank{i:02d}" for i in range(BUDGETS)]
    period = datetime.now(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    async with database.unit_of_work(scope) as session:
        for ref, kind, limit in [("", "tenant", 1_500), *((key, "api_key", 50) for key in keys)]:
            session.add(
                Budget(
                    id=new_id("bud"),
                    tenant_id=scope.tenant_id,
                    scope_kind=kind,
                    scope_ref=ref,
                    currency="USD",
                    limit_minor=limit,
                    period_start=period,
                )
            )
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.platform.billing.bank_worker",
            database_url,
            scope.tenant_id,
            str(seed),
            str(ITERATIONS),
            *keys,
            cwd=REPO_ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for seed in range(PROCESSES)
    ]
    counts: dict[str, int] = defaultdict(int)
    for worker in workers:
        out, err = await asyncio.wait_for(worker.communicate(), timeout=300)
        assert worker.returncode == 0, err.decode()
        for name, value in json.loads(out.decode().strip().splitlines()[-1]).items():
            counts[name] += value
    assert counts["admitted"] + counts["refused"] == PROCESSES * ITERATIONS
    assert counts["refused"] > 0, "the budgets must run out, or the test proves nothing"
    assert counts["admitted"] > BUDGETS

    async with database.unit_of_work(scope) as session:
        rows = list((await session.execute(select(Budget))).scalars())
        reservations = list((await session.execute(select(BudgetReservation))).scalars())
    settled: dict[str, int] = defaultdict(int)
    for reservation in reservations:
        assert reservation.status in {"settled", "released"}
        for budget_id in reservation.budget_ids:
            settled[budget_id] += reservation.actual_micros or 0
    for row in rows:
        assert row.spent_micros <= limit_micros(row), f"{row.scope_kind} {row.scope_ref} overspent"
        assert row.reserved_micros == 0
        assert row.spent_micros == settled[row.id]
    assert sum(1 for row in rows if row.spent_micros > limit_micros(row) // 2) > BUDGETS // 2  # really spent
