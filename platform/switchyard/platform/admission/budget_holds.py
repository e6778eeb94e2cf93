"""Budget holds: an admitted call holds its estimated maximum cost against every budget that applies.

The hold is taken last, after the rates and the request slot, and only for tenants that have a budget at all:
whether one has is cached for ``BUDGET_CACHE_S`` per process (refreshed ahead while the tenant calls, one read
however many calls ask: ``RefreshAheadCache``), so a call of a tenant without budgets costs no database round trip
(a new budget applies within that time). Whoever bills the call settles its hold (the
gateway's metering, the run checkpoint that bills the step); a call that ends unbilled releases it; a process
that dies leaves it to expire (``billing.budgets.RESERVATION_TTL``).

A hold is sized for the most the call may produce (``ModelCall.output_tokens``) and the compute the backend bounds
that by (:func:`held_chip_us`). A held call carries both as ceilings (``InferenceRequest.output_ceiling`` and
``compute_ceiling_chip_us``): every backend cuts its answer at the first, and one that bills measured time (an
``openai-compatible`` upstream) stops it at the second, so a settlement never passes its hold: :func:`exceeds_hold`
is the check that says so in the logs if one ever does (a backend that did not cut).
"""

from __future__ import annotations

import logging
from typing import Any

from switchyard.platform.admission.calls import ModelCall
from switchyard.platform.admission.refusals import NoRateCard
from switchyard.platform.billing import budgets
from switchyard.platform.billing.errors import NoApplicablePrice
from switchyard.platform.db import Database, TenantScope
from switchyard.platform.refresh_ahead import RefreshAheadCache

__all__ = ["BUDGET_CACHE_S", "BudgetHolds", "exceeds_hold", "held_chip_us"]

log = logging.getLogger(__name__)

BUDGET_CACHE_S = 1.0


class BudgetHolds:
    """Takes and gives back the budget holds of one process's calls."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._budgeted: RefreshAheadCache[TenantScope, bool] = RefreshAheadCache(BUDGET_CACHE_S, self._read_budgeted)

    async def hold(self, call: ModelCall) -> str | None:
        """Hold the call's estimated maximum cost; the reservation id, or ``None`` when the tenant has no budget.

        Raises ``BudgetExceeded`` (402) naming the budget that cannot cover it, :class:`NoRateCard` (503) when no
        rate card prices the call; nothing is held then.
        """
        if not await self._has_budgets(call.scope):
            return None
        try:
            reservation = await budgets.reserve(self.database, **self._terms(call))
        except NoApplicablePrice as exc:
            raise _no_rate_card(exc) from None
        return reservation.id

    async def check(self, call: ModelCall) -> None:
        """Refuse the call as :meth:`hold` would now, holding nothing (a read): for a job's first call, checked
        when the job is created, whose worker takes the hold when it makes the call."""
        if not await self._has_budgets(call.scope):
            return
        try:
            async with self.database.unit_of_work(call.scope) as session:
                await budgets.check(session, **self._terms(call))
        except NoApplicablePrice as exc:
            raise _no_rate_card(exc) from None

    @staticmethod
    def _terms(call: ModelCall) -> dict[str, Any]:
        backend = call.backend
        return {
            "scope": call.scope,
            "api_key_id": call.api_key_id,
            "agent_id": call.agent_id,
            "workflow_id": call.workflow_id,
            "model": backend.name,
            "instance_type": backend.spec.instance,
            "estimated_chip_us": held_chip_us(call),
        }

    async def release(self, scope: TenantScope, reservation_id: str) -> None:
        """Give the hold of a call that was not billed back. Never raises: a hold not given back expires."""
        try:
            await budgets.release(self.database, scope=scope, reservation_id=reservation_id)
        except Exception:
            log.warning("could not release budget hold %s; it expires by itself", reservation_id, exc_info=True)

    async def drain(self) -> None:
        """Wait for the budget reads under way (before the database closes)."""
        await self._budgeted.drain()

    async def _has_budgets(self, scope: TenantScope) -> bool:
        return await self._budgeted.get(scope)

    async def _read_budgeted(self, scope: TenantScope) -> bool:
        async with self.database.unit_of_work(scope) as session:
            return await budgets.tenant_has_budgets(session, scope=scope)


def _no_rate_card(exc: NoApplicablePrice) -> NoRateCard:
    log.error("refusing a model call: %s", exc)
    return NoRateCard(f"{exc} (operators: see /v1/admin/rate-cards)")


def held_chip_us(call: ModelCall) -> int:
    """The compute a call's budget hold is priced on: its backend's bound for its prompt and most output tokens.
    A held call may bill no more (its ``compute_ceiling_chip_us``)."""
    return call.backend.max_chip_us(call.prompt_tokens, call.output_tokens)


def exceeds_hold(call: ModelCall, *, chip_us: int, completion_tokens: int) -> bool:
    """Whether a call used more than its budget hold was sized for: more output tokens than it was allowed, or
    more compute than the backend's bound for them. Logs an error naming the call when it did (its settlement
    then records the actual spend, past the hold: the work was done). Never raises: it must not stop the billing.
    """
    try:
        bound_chip_us = held_chip_us(call)
    except Exception:
        log.warning("could not bound model call %s to check it against its hold", call.holder, exc_info=True)
        return False
    if completion_tokens <= call.output_tokens and chip_us <= bound_chip_us:
        return False
    log.error(
        "model call %s of tenant %s on %s used more than its budget hold: %d output tokens of %d allowed, "
        "%d chip-us of %d estimated",
        call.holder,
        call.scope.tenant_id,
        call.backend.name,
        completion_tokens,
        call.output_tokens,
        chip_us,
        bound_chip_us,
    )
    return True
