"""One process of the "bank" test: reserve, then settle or release, against random budgets as fast as it can.

Run as ``python -m tests.platform.billing.bank_worker URL TENANT_ID SEED ITERATIONS KEY_ID...``; prints a JSON
line of counts.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

from switchyard.platform.billing import budgets
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.db import Database, TenantScope


async def spend(url: str, tenant_id: str, seed: int, iterations: int, keys: list[str]) -> dict[str, int]:
    rng = random.Random(seed)
    database = Database(url)
    scope = TenantScope(tenant_id)
    counts = {"admitted": 0, "refused": 0, "released": 0}
    try:
        for _ in range(iterations):
            estimate = rng.randrange(50_000_000, 400_000_000)
            try:
                held = await budgets.reserve(
                    database,
                    scope=scope,
                    api_key_id=rng.choice(keys),
                    agent_id=None,
                    model="llama-3.1-8b",
                    instance_type="trn2.48xlarge",
                    estimated_chip_us=estimate,
                )
            except BudgetExceeded:
                counts["refused"] += 1
                continue
            counts["admitted"] += 1
            if rng.random() < 0.2:
                await budgets.release(database, scope=scope, reservation_id=held.id)
                counts["released"] += 1
            else:
                actual = rng.randrange(estimate // 2, estimate + 1)
                await budgets.settle(database, scope=scope, reservation_id=held.id, actual_chip_us=actual)
    finally:
        await database.dispose()
    return counts


if __name__ == "__main__":
    url, tenant_id, seed, iterations, *keys = sys.argv[1:]
    print(json.dumps(asyncio.run(spend(url, tenant_id, int(seed), int(iterations), keys))))
