"""The allowance of sign-in attempts, per email and per client address, shared by members' and operators' sign-in.

Each attempt spends one unit of both allowances before the password is checked; a success gives its units back,
so only failures count. The limiter is the process's own (the admission's: in Redis when
``SWITCHYARD_REDIS_URL`` is set), so every API process counts the same attempts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from litestar import Request

from switchyard.platform.limits import RateLimiter

__all__ = ["FAILURES_PER_CLIENT", "FAILURES_PER_EMAIL", "FAILURE_WINDOW_S", "Attempt", "spend_attempt"]

FAILURES_PER_EMAIL = 5  # attempts per email address per window; a success gives its attempt back
FAILURES_PER_CLIENT = 30  # attempts per client address per window
FAILURE_WINDOW_S = 300.0


@dataclass
class Attempt:
    """One sign-in attempt's spending: refused (``retry_after_s``, nothing spent) or counted until ``succeeded``."""

    limiter: RateLimiter
    spent: list[tuple[str, int]] = field(default_factory=list)
    refused_by: str | None = None
    """Which allowance refused it: ``email`` or ``client``."""
    retry_after_s: int = 0

    async def succeeded(self) -> None:
        """A success does not count against the allowances."""
        for key, rate in self.spent:
            await self.limiter.refund(key, rate=rate, period_s=FAILURE_WINDOW_S)


async def spend_attempt(request: Request[Any, Any, Any], kind: str, email: str) -> Attempt:
    """Spend one attempt of ``kind`` (``console-sign-in``, ``operator-sign-in``) for ``email`` and the client;
    raises ``LimitsUnavailable`` when the limiter cannot be reached."""
    limiter: RateLimiter = request.app.state.gateway.admission.rates
    client = request.client.host if request.client else "unknown"
    digest = hashlib.sha256(email.encode()).hexdigest()[:32]
    attempt = Attempt(limiter)
    for by, key, rate in (
        ("email", f"{kind}:email:{digest}", FAILURES_PER_EMAIL),
        ("client", f"{kind}:client:{client}", FAILURES_PER_CLIENT),
    ):
        decision = await limiter.hit(key, rate=rate, period_s=FAILURE_WINDOW_S)
        if not decision.allowed:
            await attempt.succeeded()  # a refused attempt spends nothing
            attempt.spent.clear()
            attempt.refused_by, attempt.retry_after_s = by, int(decision.retry_after_s) + 1
            return attempt
        attempt.spent.append((key, rate))
    return attempt
