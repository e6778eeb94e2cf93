"""The inference gateway of one API process: admission, execution on the pool, metering.

Admission is ``switchyard.platform.admission``'s, in its order (each refusal changes nothing and says why): the
model exists and the tenant may use it (404); ``max_tokens`` and the context window (400); the request fits
the tenant's per-minute token limit at all (400); the key's request rate and the tenant's token rate (429,
GCRA); the tenant's requests in flight (429); the tenant's budgets, holding the request's estimated maximum
cost (402). When the limiters cannot decide (their Redis is unreachable) the request is refused with 503 and
``retry-after``. The pool then runs the request in a task of its own, so a client that disconnects does not
stop metering: the usage event and the budget settlement are written in one transaction when the receipt
arrives. The answer always ends, even when giving the request's slot back fails (the slot then expires by
itself).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from switchyard.accelerator.pool import (
    AcceleratorPool,
    Backend,
    ComputeReceipt,
    EmbeddingRequest,
    Embeddings,
    InferenceRequest,
    PoolEvent,
    Priority,
    UpstreamError,
    count_prompt_tokens_off_loop,
    input_tokens,
)
from switchyard.platform.admission import (
    Admission,
    Holds,
    ModelCall,
    exceeds_hold,
    held_chip_us,
    model_backend,
    most_output_tokens,
    refuse_oversized,
)
from switchyard.platform.auth.principal import Principal
from switchyard.platform.billing.ledger import UsageEventCreate
from switchyard.platform.db import Database, TenantScope
from switchyard.platform.http.errors import ServiceUnavailable
from switchyard.platform.http.loop_turns import give_back_turn
from switchyard.platform.http.server_timing import mark_stage
from switchyard.platform.inference.metering import MeterBatcher, Metering
from switchyard.platform.inference.rating import RatingNudge
from switchyard.platform.inference.schemas import ChatCompletionCreate
from switchyard.platform.models import utc_now
from switchyard.platform.settings import Settings

__all__ = ["Admitted", "InferenceGateway", "RequestEvents"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_PRIORITIES = {"batch": Priority.BATCH, "standard": Priority.STANDARD, "interactive": Priority.INTERACTIVE}


@dataclass
class Admitted:
    """A request that passed admission: it holds a request slot and (maybe) a budget hold until it ends."""

    request: InferenceRequest | EmbeddingRequest
    backend: Backend
    scope: TenantScope
    api_key_id: str
    holds: Holds
    headers: dict[str, str] = field(default_factory=dict)


class RequestEvents:
    """The events of one running request, in order, for one reader: the response (an unbounded channel).

    ``asyncio.Queue`` would do; this is the same without its bounds and loop checks, on the hot path.
    """

    def __init__(self) -> None:
        self._items: deque[PoolEvent | Embeddings | Exception | None] = deque()
        self._wakeup: asyncio.Future[None] | None = None

    def put(self, item: PoolEvent | Embeddings | Exception | None) -> None:
        """Add an event, an error to raise in the reader, or ``None``: the end."""
        self._items.append(item)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def __aiter__(self) -> AsyncIterator[PoolEvent | Embeddings]:
        while True:
            while not self._items:
                self._wakeup = asyncio.get_running_loop().create_future()
                await self._wakeup
            item = self._items.popleft()
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            yield item


class InferenceGateway:
    def __init__(
        self,
        *,
        pool: AcceleratorPool,
        database: Database,
        settings: Settings,
        admission: Admission,
        rating: RatingNudge | None = None,
    ) -> None:
        self.pool = pool
        self.database = database
        self.settings = settings
        self.admission = admission
        self._tasks: set[asyncio.Task[Any]] = set()
        self.rating = rating
        self.meter = MeterBatcher(database, on_commit=rating.usage_committed if rating is not None else None)

    async def admit(self, *, principal: Principal, body: ChatCompletionCreate, request_id: str) -> Admitted:
        mark_stage("parse")
        scope = principal.scope
        assert scope is not None  # the route's guard admits tenant keys only
        backend = model_backend(self.pool, body.model, scope.tenant_id, task="chat")
        messages, tools = body.wire_messages(), body.wire_tools()
        prompt_tokens = await count_prompt_tokens_off_loop(messages, tools)
        output_cap = body.output_limit
        cap = self.settings.max_output_tokens
        refuse_oversized(backend, prompt_tokens, output_cap, max_output_tokens=cap)
        call = ModelCall(
            scope=scope,
            api_key_id=principal.key_id,
            agent_id=None,
            backend=backend,
            prompt_tokens=prompt_tokens,
            output_tokens=most_output_tokens(backend, prompt_tokens, output_cap, max_output_tokens=cap),
            # the request id may be the client's own x-request-id: not unique enough to hold a slot by itself
            holder=f"{request_id}/{secrets.token_hex(6)}",
        )
        holds = await self.admission.admit(call)
        # a held call bills no more compute than its hold covers; a call without budgets holds nothing to bound it
        compute_ceiling = held_chip_us(call) if holds.reservation_id is not None else None
        request = self._request(
            body, request_id, scope, backend, messages, tools, output_cap, call.output_tokens, compute_ceiling
        )
        mark_stage("admission")
        return Admitted(request, backend, scope, principal.key_id, holds, holds.rate_limit_headers())

    @staticmethod
    def _request(
        body: ChatCompletionCreate,
        request_id: str,
        scope: TenantScope,
        backend: Backend,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        output_cap: int | None,
        output_ceiling: int,
        compute_ceiling_chip_us: int | None,
    ) -> InferenceRequest:
        return InferenceRequest(
            request_id=request_id,
            tenant=scope.tenant_id,
            model=backend.name,
            messages=messages,
            tools=tools,
            tool_choice=body.wire_tool_choice(),
            max_tokens=output_cap,
            seed=body.seed,
            priority=_PRIORITIES[body.priority or "standard"],
            session=body.fleet_session,
            stream=bool(body.stream),
            response_format=body.wire_response_format(),
            stop=body.stop_sequences,
            ignore_eos=bool(body.ignore_eos),
            min_tokens=body.min_tokens,
            parameters=body.forwarded_parameters(),
            output_ceiling=output_ceiling,  # what the budget hold covers: no backend answers more
            compute_ceiling_chip_us=compute_ceiling_chip_us,
        )

    async def admit_embeddings(self, *, principal: Principal, backend: Backend, request: EmbeddingRequest) -> Admitted:
        """Admit an embedding call on ``backend`` (its inputs already checked against the model) as a chat
        completion is admitted: its prompt tokens, and no output."""
        mark_stage("parse")
        scope = principal.scope
        assert scope is not None  # the route's guard admits tenant keys only
        call = ModelCall(
            scope=scope,
            api_key_id=principal.key_id,
            agent_id=None,
            backend=backend,
            prompt_tokens=sum(input_tokens(request.inputs)),
            output_tokens=0,
            holder=f"{request.request_id}/{secrets.token_hex(6)}",
        )
        holds = await self.admission.admit(call)
        if holds.reservation_id is not None:  # it bills no more compute than its hold covers
            request = replace(request, compute_ceiling_chip_us=held_chip_us(call))
        mark_stage("admission")
        return Admitted(request, backend, scope, principal.key_id, holds, holds.rate_limit_headers())

    def run(self, admitted: Admitted) -> RequestEvents:
        """Start the request on the pool; iterate the returned events (they end after the receipt). The request's
        turn on the loop is given back: waiting for the pool is not work on it."""
        give_back_turn()
        events = RequestEvents()
        task = asyncio.get_running_loop().create_task(self._execute(admitted, events))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return events

    def spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` (a response's execution) in a task of its own, waited for at shutdown like a request."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel(self, admitted: Admitted) -> None:
        """The client went away: stop the request in the pool; what it used so far is still metered once."""
        admitted.backend.cancel(admitted.request.request_id)

    async def _execute(self, admitted: Admitted, events: RequestEvents) -> None:
        metered = False
        try:
            request = admitted.request
            calls = self.pool.embed(request) if isinstance(request, EmbeddingRequest) else self.pool.submit(request)
            async for event in calls:
                if isinstance(event, ComputeReceipt):
                    mark_stage("upstream")
                    await self._meter(admitted, event)  # durable before the client sees the end of the answer
                    mark_stage("metering")
                    metered = True
                events.put(event)
        except UpstreamError as exc:
            events.put(ServiceUnavailable(str(exc), code="upstream_error"))
        except Exception as exc:
            log.exception("inference request %s failed", admitted.request.request_id)
            events.put(exc)
        finally:
            try:  # the slot back first, so the client's next request finds it free; never raises
                await self.admission.finish(admitted.holds, billed=metered)
                mark_stage("admission")
            finally:
                events.put(None)  # the answer always ends, whatever failed above

    async def _meter(self, admitted: Admitted, receipt: ComputeReceipt) -> None:
        """The usage event and the budget settlement of a finished request, committed with others in a batch."""
        if admitted.holds.reservation_id is not None:
            exceeds_hold(admitted.holds.call, chip_us=receipt.chip_us, completion_tokens=receipt.completion_tokens)
        event = UsageEventCreate(
            event_id=admitted.request.request_id,
            api_key_id=admitted.api_key_id,
            model=receipt.model,
            instance_type=receipt.instance_type,
            chip_us=receipt.chip_us,
            prompt_tokens=receipt.prompt_tokens,
            completion_tokens=receipt.completion_tokens,
            cached_tokens=receipt.cached_tokens,
            cache_saved_chip_us=receipt.cache_saved_chip_us,
            occurred_at=utc_now(),
        )
        await self.meter.write(Metering(admitted.scope, event, admitted.holds.reservation_id))

    @property
    def running(self) -> int:
        """Requests admitted by this gateway and not yet finished (metering included)."""
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for requests still running (their metering included); called at shutdown."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def status(self) -> list[dict[str, Any]]:
        return await self.pool.status()

    async def reload(self, pool: AcceleratorPool) -> AcceleratorPool:
        """Serve from ``pool`` from now on; requests already running finish (and are metered) on the old one,
        which is returned once they have (closed)."""
        old = self.pool
        self.pool = pool
        await self.drain()
        await old.aclose()
        return old
