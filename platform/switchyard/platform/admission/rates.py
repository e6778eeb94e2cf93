"""The two rates a call is charged, per minute by GCRA: its API key's requests, its tenant's tokens.

The key's request is charged first, then the tenant's tokens; every charge that was allowed is pushed onto the
caller's undo stack as its refund, so a later refusal gives it back. A call that needs more tokens than the
tenant's whole per-minute limit is refused before anything is charged (400: no wait would ever fit it).
"""

from __future__ import annotations

import math
from contextlib import AsyncExitStack
from dataclasses import dataclass

from switchyard.platform.admission.calls import ModelCall
from switchyard.platform.admission.refusals import RequestExceedsTokenLimit, TryLater
from switchyard.platform.limits import Decision, RateLimiter, api_key_limit_key, tenant_limit_key

__all__ = ["RATE_PERIOD_S", "RateCharges", "charge_rates", "limit_headers", "refuse_never_fitting"]

RATE_PERIOD_S = 60.0  # both rates are per minute


@dataclass(frozen=True, slots=True)
class RateCharges:
    """The allowed decisions of an admitted call (``requests`` is ``None`` for a call without an API key)."""

    requests: Decision | None
    tokens: Decision

    def headers(self) -> dict[str, str]:
        """``x-ratelimit-*`` headers of an answer."""
        found = limit_headers("tokens", self.tokens)
        return found if self.requests is None else limit_headers("requests", self.requests) | found


def limit_headers(kind: str, decision: Decision) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{kind}": str(decision.limit),
        f"x-ratelimit-remaining-{kind}": str(decision.remaining),
        f"x-ratelimit-reset-{kind}": f"{decision.reset_s:.3f}s",
    }


def refuse_never_fitting(call: ModelCall, tokens_per_minute: int) -> None:
    """400 ``request_exceeds_token_limit`` when the call needs more than the tenant's whole per-minute limit."""
    if call.tokens <= tokens_per_minute:
        return
    # the prompt alone is too large, or the output allowance can be lowered until it fits
    param = "messages" if call.prompt_tokens >= tokens_per_minute else "max_tokens"
    raise RequestExceedsTokenLimit(
        f"this request needs up to {call.tokens} tokens ({call.prompt_tokens} in the messages and up to "
        f"{call.output_tokens} of output) but the tenant's limit is {tokens_per_minute} tokens per minute, "
        f"so it can never be admitted",
        param=param,
    )


async def charge_rates(
    limiter: RateLimiter,
    undo: AsyncExitStack,
    call: ModelCall,
    *,
    requests_per_minute: int,
    tokens_per_minute: int,
) -> RateCharges:
    """Charge the key's request and the tenant's tokens, refunds on ``undo``; raises :class:`TryLater` (429)
    naming the rate that refused (and ``LimitsUnavailable`` from the limiter)."""
    requests = None
    if call.api_key_id is not None:
        key = api_key_limit_key(call.api_key_id)
        requests = await _charge(limiter, undo, key, rate=requests_per_minute, cost=1)
        if not requests.allowed:
            raise TryLater(
                f"rate limit of {requests.limit} requests per minute for this API key reached",
                code="rate_limit_exceeded",
                retry_after_s=requests.retry_after_s,
                headers=_retry_headers("requests", requests),
            )
    tenant = tenant_limit_key(call.scope.tenant_id)
    tokens = await _charge(limiter, undo, tenant, rate=tokens_per_minute, cost=call.tokens)
    if not tokens.allowed:
        raise TryLater(
            f"this request needs up to {call.tokens} tokens; the tenant's limit is {tokens.limit} tokens per minute",
            code="tokens_per_minute_exceeded",
            retry_after_s=tokens.retry_after_s,
            headers=_retry_headers("tokens", tokens),
        )
    return RateCharges(requests, tokens)


async def _charge(limiter: RateLimiter, undo: AsyncExitStack, key: str, *, rate: int, cost: int) -> Decision:
    decision = await limiter.hit(key, rate=rate, period_s=RATE_PERIOD_S, cost=cost)
    if decision.allowed:
        undo.push_async_callback(limiter.refund, key, rate=rate, period_s=RATE_PERIOD_S, cost=cost)
    return decision


def _retry_headers(kind: str, decision: Decision) -> dict[str, str]:
    return {"retry-after": str(max(1, math.ceil(decision.retry_after_s)))} | limit_headers(kind, decision)
