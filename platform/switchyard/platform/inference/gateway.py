"""The inference gateway of one API process: admission, execution on the pool, metering.

Admission, in order (each refusal changes nothing and says why): the model exists and the tenant may use it
(404); ``max_tokens`` and the context window (400); the key's request rate and the tenant's token rate (429,
GCRA); the tenant's requests in flight (429); the tenant's budgets, holding the request's estimated maximum
cost (402). When the limiters cannot decide (their Redis is unreachable) the request is refused with 503 and
``retry-after``, before anything is held. The pool then runs the request in a task of its own, so a client
that disconnects does not stop metering: the usage event and the budget settlement are written in one
transaction when the receipt arrives. The answer always ends, even when giving the request's slot back fails
(the slot then expires by itself).
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from switchyard.accelerator.errors import UnknownNameError
from switchyard.accelerator.pool import (
    AcceleratorPool,
    Backend,
    ComputeReceipt,
    InferenceRequest,
    PoolEvent,
    Priority,
    UpstreamError,
    count_prompt_tokens,
)
from switchyard.platform.auth.principal import Principal
from switchyard.platform.billing import budgets
from switchyard.platform.billing.errors import NoApplicablePrice
from switchyard.platform.billing.ledger import UsageEventCreate
from switchyard.platform.db import Database, TenantScope
from switchyard.platform.http.errors import InvalidRequest, NotFound, RateLimited, ServiceUnavailable
from switchyard.platform.inference.metering import MeterBatcher, Metering
from switchyard.platform.inference.rating import RatingNudge
from switchyard.platform.inference.schemas import ChatCompletionCreate
from switchyard.platform.limits import (
    ConcurrencyLimiter,
    Decision,
    LimitsUnavailable,
    RateLimiter,
    api_key_limit_key,
    tenant_limit_key,
)
from switchyard.platform.models import utc_now
from switchyard.platform.settings import Settings

__all__ = ["Admitted", "InferenceGateway", "RequestEvents"]

log = logging.getLogger(__name__)
BUDGET_CACHE_S = 1.0
LIMITS_RETRY_AFTER_S = 2  # asked of clients refused because the limiters' Redis is unreachable
_PRIORITIES = {"batch": Priority.BATCH, "standard": Priority.STANDARD, "interactive": Priority.INTERACTIVE}


@dataclass
class Admitted:
    """A request that passed admission: it holds a concurrency slot and (maybe) a budget reservation."""

    request: InferenceRequest
    backend: Backend
    scope: TenantScope
    api_key_id: str
    reservation_id: str | None
    slot_holder: str  # holds the tenant's concurrency slot: unique to this request
    headers: dict[str, str] = field(default_factory=dict)


class RequestEvents:
    """The events of one running request, in order, for one reader: the response (an unbounded channel).

    ``asyncio.Queue`` would do; this is the same without its bounds and loop checks, on the hot path.
    """

    def __init__(self) -> None:
        self._items: deque[PoolEvent | Exception | None] = deque()
        self._wakeup: asyncio.Future[None] | None = None

    def put(self, item: PoolEvent | Exception | None) -> None:
        """Add an event, an error to raise in the reader, or ``None``: the end."""
        self._items.append(item)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def __aiter__(self) -> AsyncIterator[PoolEvent]:
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


def _limit_headers(kind: str, decision: Decision) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{kind}": str(decision.limit),
        f"x-ratelimit-remaining-{kind}": str(decision.remaining),
        f"x-ratelimit-reset-{kind}": f"{decision.reset_s:.3f}s",
    }


class InferenceGateway:
    def __init__(
        self,
        *,
        pool: AcceleratorPool,
        database: Database,
        settings: Settings,
        rate_limiter: RateLimiter,
        concurrency: ConcurrencyLimiter,
        rating: RatingNudge | None = None,
    ) -> None:
        self.pool = pool
        self.database = database
        self.settings = settings
        self.rate_limiter = rate_limiter
        self.concurrency = concurrency
        self._tasks: set[asyncio.Task[None]] = set()
        self.rating = rating
        self.meter = MeterBatcher(database, on_commit=rating.usage_committed if rating is not None else None)
        self._budgeted: dict[str, tuple[bool, float]] = {}

    def backend_for(self, model: str, tenant_id: str) -> Backend:
        try:
            backend = self.pool.backend(model)
        except UnknownNameError as exc:
            raise NotFound(str(exc), param="model", code="model_not_found") from None
        if backend.spec.tenants and tenant_id not in backend.spec.tenants:
            raise NotFound(
                f"the model {model!r} does not exist or you do not have access to it",
                param="model",
                code="model_not_found",
            )
        return backend

    async def admit(self, *, principal: Principal, body: ChatCompletionCreate, request_id: str) -> Admitted:
        scope = principal.scope
        assert scope is not None  # the route's guard admits tenant keys only
        backend = self.backend_for(body.model, scope.tenant_id)
        messages, tools = body.wire_messages(), body.wire_tools()
        prompt_tokens = count_prompt_tokens(messages, tools)
        output_cap = body.output_limit
        if output_cap is not None and output_cap > self.settings.max_output_tokens:
            raise InvalidRequest(
                f"max_tokens is {output_cap}; at most {self.settings.max_output_tokens} is allowed",
                param="max_tokens",
                code="invalid_value",
            )
        window = backend.context_window
        if prompt_tokens + (output_cap or 1) > window:
            raise InvalidRequest(
                f"this model's context window is {window} tokens; the messages use {prompt_tokens}"
                + (f" and max_tokens asks for {output_cap} more" if output_cap else ""),
                param="messages",
                code="context_length_exceeded",
            )
        worst_output = output_cap or min(self.settings.max_output_tokens, window - prompt_tokens)
        slot = tenant_limit_key(scope.tenant_id)
        # the request id may be the client's own x-request-id: not unique enough to hold a slot by itself
        holder = f"{request_id}/{secrets.token_hex(6)}"
        try:
            headers = await self._check_rates(principal.key_id, scope.tenant_id, prompt_tokens + worst_output)
            taken = await self.concurrency.acquire(slot, self.settings.tenant_max_concurrency, holder)
        except LimitsUnavailable as exc:
            log.warning("refusing inference: %s", exc)
            raise ServiceUnavailable(
                "request limits cannot be checked right now; retry shortly",
                code="limits_unavailable",
                headers={"retry-after": str(LIMITS_RETRY_AFTER_S)},
            ) from None
        if not taken:
            raise RateLimited(
                f"too many requests in flight for this tenant (limit {self.settings.tenant_max_concurrency})",
                code="concurrency_limit_exceeded",
                headers={"retry-after": "1"},
            )
        reservation_id: str | None = None
        try:
            if await self._has_budgets(scope):
                reservation = await budgets.reserve(
                    self.database,
                    scope=scope,
                    api_key_id=principal.key_id,
                    agent_id=None,
                    model=backend.name,
                    instance_type=backend.spec.instance,
                    estimated_chip_us=backend.max_chip_us(prompt_tokens, worst_output),
                )
                reservation_id = reservation.id
        except NoApplicablePrice as exc:
            await self.concurrency.release(slot, holder)
            log.error("refusing inference: %s", exc)
            raise ServiceUnavailable(f"{exc} (operators: see /v1/admin/rate-cards)", code="no_rate_card") from None
        except BaseException:
            await self.concurrency.release(slot, holder)
            raise
        request = self._request(body, request_id, scope, backend, messages, tools, output_cap)
        return Admitted(request, backend, scope, principal.key_id, reservation_id, holder, headers)

    @staticmethod
    def _request(
        body: ChatCompletionCreate,
        request_id: str,
        scope: TenantScope,
        backend: Backend,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        output_cap: int | None,
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
            session=body.user,
            stream=bool(body.stream),
        )

    async def _has_budgets(self, scope: TenantScope) -> bool:
        """Whether the tenant has any budget (cached ``BUDGET_CACHE_S``: a new budget applies within that time)."""
        now = time.monotonic()
        cached = self._budgeted.get(scope.tenant_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        async with self.database.unit_of_work(scope) as session:
            found = await budgets.tenant_has_budgets(session, scope=scope)
        self._budgeted[scope.tenant_id] = (found, now + BUDGET_CACHE_S)
        return found

    async def _check_rates(self, key_id: str, tenant_id: str, tokens: int) -> dict[str, str]:
        requests = await self.rate_limiter.hit(
            api_key_limit_key(key_id), rate=self.settings.key_requests_per_minute, period_s=60.0
        )
        if not requests.allowed:
            raise RateLimited(
                f"rate limit of {requests.limit} requests per minute for this API key reached",
                code="rate_limit_exceeded",
                headers=self._retry(requests, "requests"),
            )
        budget = await self.rate_limiter.hit(
            tenant_limit_key(tenant_id), rate=self.settings.tenant_tokens_per_minute, period_s=60.0, cost=tokens
        )
        if not budget.allowed:
            raise RateLimited(
                f"this request needs up to {tokens} tokens; the tenant's limit is {budget.limit} tokens per minute",
                code="tokens_per_minute_exceeded",
                headers=self._retry(budget, "tokens"),
            )
        return _limit_headers("requests", requests) | _limit_headers("tokens", budget)

    @staticmethod
    def _retry(decision: Decision, kind: str) -> dict[str, str]:
        retry = decision.retry_after_s
        seconds = "86400" if math.isinf(retry) else str(max(1, math.ceil(retry)))
        return {"retry-after": seconds} | _limit_headers(kind, decision)

    def run(self, admitted: Admitted) -> RequestEvents:
        """Start the request on the pool; iterate the returned events (they end after the receipt)."""
        events = RequestEvents()
        task = asyncio.get_running_loop().create_task(self._execute(admitted, events))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return events

    def cancel(self, admitted: Admitted) -> None:
        """The client went away: stop the request in the pool; what it used so far is still metered once."""
        admitted.backend.cancel(admitted.request.request_id)

    async def _execute(self, admitted: Admitted, events: RequestEvents) -> None:
        metered = False
        try:
            async for event in self.pool.submit(admitted.request):
                if isinstance(event, ComputeReceipt):
                    await self._meter(admitted, event)  # durable before the client sees the end of the answer
                    metered = True
                events.put(event)
        except UpstreamError as exc:
            events.put(ServiceUnavailable(str(exc), code="upstream_error"))
        except Exception as exc:
            log.exception("inference request %s failed", admitted.request.request_id)
            events.put(exc)
        finally:
            try:
                if not metered and admitted.reservation_id:
                    await budgets.release(self.database, scope=admitted.scope, reservation_id=admitted.reservation_id)
            finally:
                try:  # the slot first, so the client's next request finds it free; never raises
                    await self.concurrency.release(tenant_limit_key(admitted.scope.tenant_id), admitted.slot_holder)
                finally:
                    events.put(None)  # the answer always ends, whatever failed above

    async def _meter(self, admitted: Admitted, receipt: ComputeReceipt) -> None:
        """The usage event and the budget settlement of a finished request, committed with others in a batch."""
        event = UsageEventCreate(
            event_id=admitted.request.request_id,
            api_key_id=admitted.api_key_id,
            model=receipt.model,
            instance_type=receipt.instance_type,
            chip_us=receipt.chip_us,
            prompt_tokens=receipt.prompt_tokens,
            completion_tokens=receipt.completion_tokens,
            occurred_at=utc_now(),
        )
        await self.meter.write(Metering(admitted.scope, event, admitted.reservation_id))

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
