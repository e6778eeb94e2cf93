"""Admission of one model call: the checks in order, each refusal undoing what the checks before it took.

In order: the call can fit the tenant's token rate at all (400, nothing charged yet); the API key's request
rate and the tenant's token rate (429); one of the tenant's requests in flight (429); the budgets that apply
(402). Every charge and hold is pushed onto an undo stack as it is taken; a refusal, an error or a
cancellation unwinds the stack in reverse order (the slot is given back, the token and request charges
refunded), so a refused call leaves every limit as it found it. When the limiters cannot decide (their Redis
is unreachable) the call is refused with :class:`LimitsOutage`, after the same undoing.

Model access and the size of a request come first, from ``access`` and ``calls``: they decide which deployment
the call is for and how many tokens it counts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, TypeVar

from switchyard.platform.admission.budget_holds import BudgetHolds
from switchyard.platform.admission.calls import ModelCall
from switchyard.platform.admission.rates import RateCharges, charge_rates, refuse_never_fitting
from switchyard.platform.admission.refusals import LimitsOutage, TryLater
from switchyard.platform.db import Database
from switchyard.platform.limits import (
    ConcurrencyLimiter,
    LimitsUnavailable,
    RateLimiter,
    limiters_for,
    tenant_limit_key,
)
from switchyard.platform.observability.instrument import count_refusals
from switchyard.platform.settings import Settings

__all__ = ["Admission", "Holds", "admission_for"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Holds:
    """What an admitted call holds until :meth:`Admission.finish`: one of its tenant's request slots and, when
    the tenant has budgets, a budget hold (``reservation_id``, settled by whoever bills the call). ``rates`` is
    ``None`` for a call whose rates were charged before (when its background job was created)."""

    call: ModelCall
    rates: RateCharges | None
    reservation_id: str | None

    def rate_limit_headers(self) -> dict[str, str]:
        return {} if self.rates is None else self.rates.headers()


class Admission:
    """The admission of one process: its limiters (shared through Redis when configured), budget holds, and
    the limits of ``settings`` (read at each call, so a changed setting applies to the next call)."""

    def __init__(
        self,
        *,
        database: Database,
        settings: Settings,
        rates: RateLimiter,
        slots: ConcurrencyLimiter,
        redis: Any = None,
    ) -> None:
        self.settings = settings
        self.rates = rates
        self.slots = slots
        self.budgets = BudgetHolds(database)
        self._redis = redis

    async def admit(self, call: ModelCall, *, rates_charged: bool = False) -> Holds:
        """Admit ``call`` or refuse it having changed nothing. ``rates_charged``: the call's rates were charged
        when its background job was created (the job's first call), so only its slot and budget hold are taken.

        Raises ``RequestExceedsTokenLimit`` (400), :class:`TryLater` (429: a rate, or no request slot free),
        ``BudgetExceeded`` (402), ``NoRateCard`` or :class:`LimitsOutage` (503); and whatever the database raises.
        """
        refuse_never_fitting(call, self.settings.tenant_tokens_per_minute)
        async with AsyncExitStack() as undo:
            rates = None if rates_charged else await self._charge_rates(undo, call)
            await self._take_slot(undo, call)
            reservation_id = await self.budgets.hold(call)
            undo.pop_all()  # admitted: the call keeps what it took
        return Holds(call, rates, reservation_id)

    async def admit_ahead(self, call: ModelCall) -> None:
        """Admit the first call of a job that a worker runs (a run, a background response) when the job is
        created: refused as :meth:`admit` would refuse it, but only its rates stay charged (the worker's call is
        not charged again); no request slot or budget hold is kept (the worker's call takes them), and the
        budgets are only read, not held and given back."""
        refuse_never_fitting(call, self.settings.tenant_tokens_per_minute)
        async with AsyncExitStack() as undo:
            await self._charge_rates(undo, call)
            async with AsyncExitStack() as slot:  # one must be free now; it is given back on leaving
                await self._take_slot(slot, call)
                await self.budgets.check(call)
            undo.pop_all()  # admitted: the rates stay charged

    async def _charge_rates(self, undo: AsyncExitStack, call: ModelCall) -> RateCharges:
        settings = self.settings
        return await self._limited(
            charge_rates(
                self.rates,
                undo,
                call,
                requests_per_minute=settings.key_requests_per_minute,
                tokens_per_minute=settings.tenant_tokens_per_minute,
            ),
            call,
        )

    async def _take_slot(self, undo: AsyncExitStack, call: ModelCall) -> None:
        slot, limit = tenant_limit_key(call.scope.tenant_id), self.settings.tenant_max_concurrency
        if not await self._limited(self.slots.acquire(slot, limit, call.holder), call):
            raise TryLater(
                f"too many requests in flight for this tenant (limit {limit})",
                code="concurrency_limit_exceeded",
                retry_after_s=None,
                headers={"retry-after": "1"},
            )
        undo.push_async_callback(self.slots.release, slot, call.holder)

    @staticmethod
    async def _limited(decision: Awaitable[T], call: ModelCall) -> T:
        """``decision`` of the limiters, refused with :class:`LimitsOutage` (503) when they cannot decide."""
        try:
            return await decision
        except LimitsUnavailable as exc:
            log.warning("cannot admit a model call of tenant %s: %s", call.scope.tenant_id, exc)
            raise LimitsOutage() from None

    async def finish(self, holds: Holds, *, billed: bool) -> None:
        """The call ended: release its budget hold unless it was billed (its biller settles the hold), then
        give its request slot back. Never raises: what cannot be given back expires by itself."""
        call = holds.call
        try:
            if not billed and holds.reservation_id is not None:
                await self.budgets.release(call.scope, holds.reservation_id)
        finally:
            await self.slots.release(tenant_limit_key(call.scope.tenant_id), call.holder)

    async def aclose(self) -> None:
        """Wait for the budget reads under way, and close the limiters' Redis client, if any."""
        await self.budgets.drain()
        if self._redis is not None:
            await self._redis.aclose()


def admission_for(settings: Settings, database: Database) -> Admission:
    """The admission of one process: limiters in ``SWITCHYARD_REDIS_URL``'s Redis when set, else in-process."""
    rates, slots, redis = limiters_for(settings.redis_url_value)
    return count_refusals(Admission(database=database, settings=settings, rates=rates, slots=slots, redis=redis))
