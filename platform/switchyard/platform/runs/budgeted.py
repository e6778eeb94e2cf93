"""Budgets for agent runs: each model call holds its estimated maximum cost, like a gateway request.

Before a model call, the estimated maximum (the backend's bound for the prompt and the output cap) is
reserved against every budget that applies (tenant, API key, agent); a hard budget that cannot cover it
refuses the call, and the run fails (``last_error.code = "budget_exceeded"``, the message names the budget).
The hold is settled to the step's actual compute in the checkpoint that bills the step, so spend and usage
commit together; a call that fails gives the hold back; a worker that dies leaves it to expire.
"""

from __future__ import annotations

import contextlib
import logging

from sqlalchemy.exc import InterfaceError, OperationalError

from switchyard.accelerator.pool import Backend, count_prompt_tokens
from switchyard.agents import Model, ModelCallInterrupted, ModelCallRefused, ModelRequest, ModelResponse
from switchyard.platform.billing import budgets
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.db import Database, TenantScope

__all__ = ["BudgetedModel", "call_bounds"]

log = logging.getLogger(__name__)


def call_bounds(backend: Backend, request: ModelRequest, max_output_tokens: int) -> tuple[int, int]:
    """(prompt tokens, most output tokens) of a model call: what its holds and rate limits count."""
    prompt = count_prompt_tokens([m.to_openai() for m in request.messages], list(request.tools))
    room = max(1, backend.context_window - prompt)
    return prompt, min(request.params.max_tokens or max_output_tokens, room)


class BudgetedModel:
    """Wraps a model: budget holds around each call; ``reservations`` maps step ids to open holds."""

    def __init__(
        self,
        inner: Model,
        *,
        database: Database,
        scope: TenantScope,
        backend: Backend,
        api_key_id: str | None,
        agent_id: str,
        max_output_tokens: int,
        reservations: dict[str, str] | None = None,
    ) -> None:
        self.inner = inner
        self.database = database
        self.scope = scope
        self.backend = backend
        self.api_key_id = api_key_id
        self.agent_id = agent_id
        self.max_output_tokens = max_output_tokens
        self.reservations = reservations if reservations is not None else {}

    async def _has_budgets(self) -> bool:
        async with self.database.unit_of_work(self.scope) as session:
            return await budgets.tenant_has_budgets(session, scope=self.scope)

    async def request(self, request: ModelRequest) -> ModelResponse:
        try:
            return await self._request(request)
        except (OperationalError, InterfaceError) as exc:  # the database went away: the run is not to blame
            raise ModelCallInterrupted(f"the database was unavailable: {exc.orig or exc}") from exc

    async def _request(self, request: ModelRequest) -> ModelResponse:
        reservation_id = None
        if await self._has_budgets():
            prompt, output = call_bounds(self.backend, request, self.max_output_tokens)
            try:
                reservation = await budgets.reserve(
                    self.database,
                    scope=self.scope,
                    api_key_id=self.api_key_id,
                    agent_id=self.agent_id,
                    model=self.backend.name,
                    instance_type=self.backend.spec.instance,
                    estimated_chip_us=self.backend.max_chip_us(prompt, output),
                )
            except BudgetExceeded as exc:
                raise ModelCallRefused(exc.code, exc.message) from exc
            reservation_id = reservation.id
            self.reservations[request.request_id] = reservation_id
        try:
            return await self.inner.request(request)
        except BaseException:
            if reservation_id is not None:
                self.reservations.pop(request.request_id, None)
                with contextlib.suppress(Exception):
                    await budgets.release(self.database, scope=self.scope, reservation_id=reservation_id)
            raise
