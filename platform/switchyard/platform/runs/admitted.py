"""Agent runs' model calls go through the platform's one admission path, waiting instead of being refused.

Before each model call a run takes what ``/v1/chat/completions`` takes, from the same admission (its limiters
are shared by the API and worker processes through Redis when ``SWITCHYARD_REDIS_URL`` is set, per process
otherwise): a request from its API key's per-minute rate, the call's prompt plus most output tokens from the
tenant's per-minute token rate, one of the tenant's requests in flight, and a hold on every budget that applies
(tenant, API key, agent). A run is a background job, so what time cures is waited out (``admit_waiting``:
rates, request slots, an unreachable Redis), within the run's time limit (the run then stops as
``incomplete``); any other refusal fails the run with its code (``request_exceeds_token_limit`` for a call that
can never fit the tenant's token rate, ``budget_exceeded`` naming the budget), before any work.

The request slot is held under the call's step id (a crashed worker's call, repeated, takes over its dead
predecessor's slot) and given back when the call ends. The budget hold is settled to the step's actual compute
in the checkpoint that bills the step, so spend and usage commit together; a call that fails gives the hold
back; a worker that dies leaves it to expire.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable

from sqlalchemy.exc import InterfaceError, OperationalError

from switchyard.accelerator.pool import Backend, count_prompt_tokens
from switchyard.agents import Model, ModelCallInterrupted, ModelCallRefused, ModelRequest, ModelResponse
from switchyard.platform.admission import Admission, Holds, ModelCall, admit_waiting, most_output_tokens
from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import ApiError

__all__ = ["AdmittedModel"]


class AdmittedModel:
    """Wraps a run's model: admits each call (waiting), and gives back what it held when the call ends.

    ``reservations`` maps the step ids of successful calls to their budget holds, for the checkpoint to settle;
    ``admitted`` is the first call's admission when the caller took it already (a foreground response is
    refused at once, as a chat completion is, rather than waiting).
    """

    def __init__(
        self,
        inner: Model,
        *,
        admission: Admission,
        scope: TenantScope,
        backend: Backend,
        api_key_id: str | None,
        agent_id: str | None,
        reservations: dict[str, str] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        admitted: Holds | None = None,
    ) -> None:
        self.inner = inner
        self.admission = admission
        self.scope = scope
        self.backend = backend
        self.api_key_id = api_key_id
        self.agent_id = agent_id
        self.reservations = reservations if reservations is not None else {}
        self.sleep = sleep
        self.admitted = admitted

    def _call(self, request: ModelRequest) -> ModelCall:
        prompt = count_prompt_tokens([m.to_openai() for m in request.messages], list(request.tools))
        cap = self.admission.settings.max_output_tokens
        return ModelCall(
            scope=self.scope,
            api_key_id=self.api_key_id,
            agent_id=self.agent_id,
            backend=self.backend,
            prompt_tokens=prompt,
            output_tokens=most_output_tokens(self.backend, prompt, request.params.max_tokens, max_output_tokens=cap),
            holder=request.request_id or f"call-{secrets.token_hex(8)}",
        )

    async def _admit(self, call: ModelCall) -> Holds:
        try:
            return await admit_waiting(self.admission, call, sleep=self.sleep)
        except ApiError as refused:
            raise ModelCallRefused(refused.code or "refused", refused.message) from refused
        except (OperationalError, InterfaceError) as exc:  # the database went away: the run is not to blame
            raise ModelCallInterrupted(f"the database was unavailable: {exc.orig or exc}") from exc

    async def request(self, request: ModelRequest) -> ModelResponse:
        holds, self.admitted = self.admitted, None
        if holds is None:
            holds = await self._admit(self._call(request))
        billed = False
        try:
            response = await self.inner.request(request)
            billed = True
        finally:
            if billed and holds.reservation_id is not None:
                self.reservations[request.request_id] = holds.reservation_id
            await self.admission.finish(holds, billed=billed)
        return response
