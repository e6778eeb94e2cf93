"""Start and stop the inference gateway of one API process (pool, limiters, default rate cards)."""

from __future__ import annotations

import time
from typing import Any

from switchyard.accelerator.pool import AcceleratorPool, load_fleet
from switchyard.platform.billing.rates import ensure_default_rate_cards
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.inference.gateway import InferenceGateway
from switchyard.platform.limits import limiters_for
from switchyard.platform.settings import Settings

__all__ = ["start_gateway", "stop_gateway"]


async def start_gateway(state: Any, settings: Settings, database: Database) -> InferenceGateway:
    specs = load_fleet(settings.fleet_file)
    async with database.unit_of_work(UNSCOPED) as session:
        await ensure_default_rate_cards(session, instance_types=sorted({s.instance for s in specs}))
    redis_url = settings.redis_url.get_secret_value() if settings.redis_url else None
    rate_limiter, concurrency, redis_client = limiters_for(redis_url)
    gateway = InferenceGateway(
        pool=AcceleratorPool.from_specs(specs, time_scale=settings.time_scale),
        database=database,
        settings=settings,
        rate_limiter=rate_limiter,
        concurrency=concurrency,
    )
    state.gateway = gateway
    state.redis = redis_client
    state.started_at = time.time()
    return gateway


async def stop_gateway(state: Any) -> None:
    gateway: InferenceGateway = state.gateway
    await gateway.drain()
    await gateway.pool.aclose()
    if state.redis is not None:
        await state.redis.aclose()
