"""Rate limits for agent runs: each model call is admitted like a gateway request, but waits instead of failing.

Before a model call a run takes what ``/v1/chat/completions`` takes, from the same limiters (shared by the API
and worker processes through Redis when ``SWITCHYARD_REDIS_URL`` is set, per process otherwise): a request
from its API key's per-minute rate, the call's prompt plus most output tokens from the tenant's per-minute
token rate, and one of the tenant's requests in flight, held until the call ends. A run is a background job,
so a refusal is not an error: the call waits until it would be allowed. The run's time limit bounds the wait
(the run then stops as ``incomplete``), and a call that can never fit (more tokens than the tenant's
per-minute limit) fails the run with ``tokens_per_minute_exceeded``.

When the limiters' Redis is unreachable the call waits too (its run is not failed for an outage it did not
cause): it asks again after ``OUTAGE_POLL_S``, doubling up to ``OUTAGE_POLL_MAX_S``, within the same time
limit. The slot is held under the call's step id and given back when the call ends; if that fails it
expires by itself.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from switchyard.accelerator.pool import Backend
from switchyard.agents import Model, ModelCallRefused, ModelRequest, ModelResponse
from switchyard.platform.limits import (
    ConcurrencyLimiter,
    Decision,
    LimitsUnavailable,
    RateLimiter,
    api_key_limit_key,
    tenant_limit_key,
)
from switchyard.platform.runs.budgeted import call_bounds
from switchyard.platform.settings import Settings

__all__ = ["RateLimitedModel", "RunLimits"]

SLOT_POLL_S = 0.05  # first wait for a request slot; doubles up to SLOT_POLL_MAX_S
SLOT_POLL_MAX_S = 1.0
OUTAGE_POLL_S = 0.5  # first wait when the limiters' Redis is unreachable; doubles up to OUTAGE_POLL_MAX_S
OUTAGE_POLL_MAX_S = 5.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunLimits:
    """The limiters and limits agent runs are admitted by (the gateway's, from the same settings)."""

    rate_limiter: RateLimiter
    concurrency: ConcurrencyLimiter
    tenant_tokens_per_minute: int
    key_requests_per_minute: int
    tenant_max_concurrency: int
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep)

    @classmethod
    def from_settings(cls, settings: Settings, rate_limiter: RateLimiter, concurrency: ConcurrencyLimiter) -> RunLimits:
        return cls(
            rate_limiter=rate_limiter,
            concurrency=concurrency,
            tenant_tokens_per_minute=settings.tenant_tokens_per_minute,
            key_requests_per_minute=settings.key_requests_per_minute,
            tenant_max_concurrency=settings.tenant_max_concurrency,
        )


class RateLimitedModel:
    """Wraps a model: waits for the rate allowances and a request slot before each call."""

    def __init__(
        self,
        inner: Model,
        *,
        limits: RunLimits,
        backend: Backend,
        tenant_id: str,
        api_key_id: str | None,
        max_output_tokens: int,
    ) -> None:
        self.inner = inner
        self.limits = limits
        self.backend = backend
        self.tenant_id = tenant_id
        self.api_key_id = api_key_id
        self.max_output_tokens = max_output_tokens

    async def _hit(self, key: str, *, rate: int, cost: int) -> Decision:
        outage = OUTAGE_POLL_S
        while True:
            try:
                return await self.limits.rate_limiter.hit(key, rate=rate, period_s=60.0, cost=cost)
            except LimitsUnavailable as exc:
                log.warning("model call of tenant %s waits: %s", self.tenant_id, exc)
                await self.limits.sleep(outage)
                outage = min(2 * outage, OUTAGE_POLL_MAX_S)

    async def _wait_for_rate(self, key: str, *, rate: int, cost: int) -> None:
        while True:
            decision = await self._hit(key, rate=rate, cost=cost)
            if decision.allowed:
                return
            if math.isinf(decision.retry_after_s):
                raise ModelCallRefused(
                    "tokens_per_minute_exceeded",
                    f"this model call needs up to {cost} tokens; the tenant's limit is {rate} tokens per minute",
                )
            await self.limits.sleep(decision.retry_after_s)

    async def _wait_for_slot(self, slot: str, holder: str) -> None:
        pause, outage = SLOT_POLL_S, OUTAGE_POLL_S
        while True:
            try:
                if await self.limits.concurrency.acquire(slot, self.limits.tenant_max_concurrency, holder):
                    return
            except LimitsUnavailable as exc:
                log.warning("model call of tenant %s waits: %s", self.tenant_id, exc)
                await self.limits.sleep(outage)
                outage = min(2 * outage, OUTAGE_POLL_MAX_S)
                continue
            await self.limits.sleep(pause)
            pause = min(2 * pause, SLOT_POLL_MAX_S)

    async def request(self, request: ModelRequest) -> ModelResponse:
        limits = self.limits
        if self.api_key_id is not None:
            await self._wait_for_rate(api_key_limit_key(self.api_key_id), rate=limits.key_requests_per_minute, cost=1)
        prompt, output = call_bounds(self.backend, request, self.max_output_tokens)
        tenant = tenant_limit_key(self.tenant_id)
        await self._wait_for_rate(tenant, rate=limits.tenant_tokens_per_minute, cost=prompt + output)
        # The step id: unique to the call, and the same when a crashed worker's call is repeated, which then
        # takes over its dead predecessor's slot instead of waiting for the slot to expire.
        holder = request.request_id or f"call-{secrets.token_hex(8)}"
        await self._wait_for_slot(tenant, holder)
        try:
            return await self.inner.request(request)
        finally:
            await limits.concurrency.release(tenant, holder)
