"""Agent runs' model calls go through the platform's one admission path, waiting instead of being refused.

Before each model call a run takes what ``/v1/chat/completions`` takes, from the same admission (its limiters
are shared by the API and worker processes through Redis when ``SWITCHYARD_REDIS_URL`` is set, per process
otherwise): a request from its API key's per-minute rate, the call's prompt plus most output tokens from the
tenant's per-minute token rate, one of the tenant's requests in flight, and a hold on every budget that applies
(tenant, API key, the acting agent, and the workflow whose run it is). A run is a background job, so what time
cures (rates, request slots, an unreachable Redis) is waited for, within the run's time limit (the run then stops as
``incomplete``); any other refusal fails the run with its code (``request_exceeds_token_limit`` for a call that can
never fit the tenant's token rate, ``budget_exceeded`` naming the budget), before any work.

Where it waits depends on who drives it. In a worker (``defer``) the call raises :class:`AdmissionDeferred`
instead: the job stops at its last checkpoint and gives its worker slot back until the time the refusal names
(the executor puts it aside; see ``execution/lease.py``). Elsewhere (a foreground response in its API process) it
waits in place (``admit_waiting``).

A job's first model call was admitted when the job was created (``POST`` answers 429 then, as a chat completion
does): a background job's creation charged its rates, a foreground response's took the whole admission. That
admission (:class:`FirstCall`, one per drive of a job) is the first call's, whichever of the job's agents makes it:
in a workflow run the job's own agent (the workflow) never calls the model, a node's agent does. A call that finds
the creation's holds taken for another agent or model gives back their request slot and budget hold and takes its
own, but not its rates again.

The request slot is held under the call's step id (a crashed worker's call, repeated, takes over its dead
predecessor's slot) and given back when the call ends. The budget hold is settled to the step's actual compute
in the checkpoint that bills the step, so spend and usage commit together; a call that fails gives the hold
back; a worker that dies leaves it to expire.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import InterfaceError, OperationalError

from switchyard.accelerator.pool import Backend, count_prompt_tokens_off_loop
from switchyard.agents import (
    AgentSpec,
    Model,
    ModelCallInterrupted,
    ModelCallRefused,
    ModelRequest,
    ModelResponse,
    RunState,
)
from switchyard.platform.admission import (
    Admission,
    Holds,
    LimitsOutage,
    ModelCall,
    TryLater,
    admit_waiting,
    exceeds_hold,
    held_chip_us,
    most_output_tokens,
)
from switchyard.platform.admission.waiting import retry_in_s
from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import ApiError
from switchyard.platform.models import utc_now

__all__ = ["AdmissionDeferred", "AdmittedModel", "FirstCall", "time_limit_of"]


def time_limit_of(spec: AgentSpec, state: RunState) -> datetime | None:
    """When the run's time limit passes (``None`` before it started)."""
    if state.started_at_ms is None:
        return None
    return datetime.fromtimestamp(state.started_at_ms / 1000 + spec.limits.timeout_s, tz=UTC)


class AdmissionDeferred(ModelCallInterrupted):
    """A worker's model call must wait (``code``: the refusal's, e.g. ``rate_limit_exceeded``) until ``until``:
    driving stops at the last checkpoint and the job is put aside, holding nothing, until then."""

    def __init__(self, code: str, until: datetime) -> None:
        super().__init__(f"admission deferred ({code}) until {until.isoformat()}")
        self.code = code
        self.until = until

    def capped(self, deadline: datetime | None) -> AdmissionDeferred:
        """The same deferral, ending at the job's time limit if that comes first (the job then stops there)."""
        if deadline is None or deadline >= self.until:
            return self
        return AdmissionDeferred(self.code, deadline)


class FirstCall:
    """What a job's creation took for its first model call, until one of the job's models makes that call.

    ``admitted``: the call's whole admission, when the caller took it already (a foreground response is refused at
    once, as a chat completion is, rather than waiting); ``rates_charged``: only its rates were charged (a
    background job's creation).
    """

    def __init__(self, admitted: Holds | None = None, *, rates_charged: bool = False) -> None:
        self.admitted = admitted
        self.rates_charged = rates_charged or admitted is not None

    def take(self) -> tuple[Holds | None, bool]:
        """The admission and whether the rates were charged, for the call about to be made (the first: after it,
        there is nothing left to take)."""
        taken = self.admitted, self.rates_charged
        self.admitted, self.rates_charged = None, False
        return taken

    async def give_back(self, admission: Admission) -> None:
        """No call took the holds (the job stopped before its first model call): give back their request slot and
        budget hold. The rates stay charged, as a refused job's creation leaves them."""
        holds, self.admitted = self.admitted, None
        if holds is not None:
            await admission.finish(holds, billed=False)


class AdmittedModel:
    """Wraps a run's model: admits each call (waiting), and gives back what it held when the call ends.

    ``reservations`` maps the step ids of successful calls to their budget holds, for the checkpoint to settle;
    ``first`` is the admission the job's creation took for its first call (shared by the job's models: the first of
    them to call takes it), or else ``admitted`` and ``rates_charged`` as :class:`FirstCall` takes them;
    ``workflow_id`` is the workflow whose run makes the calls (its budgets hold them too); ``defer`` raises
    :class:`AdmissionDeferred` instead of waiting, and ``waiting_since`` is when the job last made progress (how
    long it has waited sets how often a slot is asked).
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
        rates_charged: bool = False,
        first: FirstCall | None = None,
        workflow_id: str | None = None,
        defer: bool = False,
        waiting_since: datetime | None = None,
    ) -> None:
        self.inner = inner
        self.admission = admission
        self.scope = scope
        self.backend = backend
        self.api_key_id = api_key_id
        self.agent_id = agent_id
        self.reservations = reservations if reservations is not None else {}
        self.sleep = sleep
        self.first = first if first is not None else FirstCall(admitted, rates_charged=rates_charged)
        self.workflow_id = workflow_id
        self.defer = defer
        self.waiting_since = waiting_since

    async def _call(self, request: ModelRequest) -> ModelCall:
        prompt = await count_prompt_tokens_off_loop([m.to_openai() for m in request.messages], list(request.tools))
        cap = self.admission.settings.max_output_tokens
        return ModelCall(
            scope=self.scope,
            api_key_id=self.api_key_id,
            agent_id=self.agent_id,
            backend=self.backend,
            prompt_tokens=prompt,
            output_tokens=most_output_tokens(self.backend, prompt, request.params.max_tokens, max_output_tokens=cap),
            holder=request.request_id or f"call-{secrets.token_hex(8)}",
            workflow_id=self.workflow_id,
        )

    def _made_for(self, holds: Holds) -> bool:
        """Whether ``holds`` were taken for this model's calls (its agent and model), not another agent's."""
        return holds.call.agent_id == self.agent_id and holds.call.backend.name == self.backend.name

    async def _admit(self, call: ModelCall, *, rates_charged: bool) -> Holds:
        try:
            if not self.defer:
                return await admit_waiting(self.admission, call, sleep=self.sleep, rates_charged=rates_charged)
            return await self.admission.admit(call, rates_charged=rates_charged)
        except (TryLater, LimitsOutage) as refused:  # (only when deferring: admit_waiting waits these out)
            now = utc_now()
            waited_s = (now - self.waiting_since).total_seconds() if self.waiting_since is not None else 0.0
            until = now + timedelta(seconds=retry_in_s(refused, waited_s=waited_s))
            raise AdmissionDeferred(refused.code or "try_later", until) from None
        except ApiError as refused:
            raise ModelCallRefused(refused.code or "refused", refused.message) from refused
        except (OperationalError, InterfaceError) as exc:  # the database went away: the run is not to blame
            raise ModelCallInterrupted(f"the database was unavailable: {exc.orig or exc}") from exc

    async def request(self, request: ModelRequest) -> ModelResponse:
        holds, rates_charged = self.first.take()
        if holds is not None and not self._made_for(holds):
            # taken for the job's own agent, and another acts first (a workflow's node): its slot and budget hold
            # were sized and held for that agent, so they go back; its rate charge is this call's
            await self.admission.finish(holds, billed=False)
            holds = None
        if holds is None:
            holds = await self._admit(await self._call(request), rates_charged=rates_charged)
        # the call may produce no more than its budget hold covers (the most output tokens admission sized it by),
        # nor bill more compute
        compute_ceiling = held_chip_us(holds.call) if holds.reservation_id is not None else None
        ceilings = {"output_ceiling": holds.call.output_tokens, "compute_ceiling_chip_us": compute_ceiling}
        request = request.model_copy(update=ceilings)
        self.waiting_since = None  # admitted: the next refusal waits from now
        billed = False
        try:
            response = await self.inner.request(request)
            billed = True
            if holds.reservation_id is not None:  # logged if it ever used more than its hold was sized for
                exceeds_hold(holds.call, chip_us=response.chip_us, completion_tokens=response.usage.output_tokens)
        finally:
            if billed and holds.reservation_id is not None:
                self.reservations[request.request_id] = holds.reservation_id
            await self.admission.finish(holds, billed=billed)
        return response
