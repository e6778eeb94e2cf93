"""The allowance of password attempts, shared by members' and operators' sign-in and the password-change form.

Each attempt spends one unit of three allowances before the password is checked; a success gives its units back,
so only failures count:

- per account *and* client address (:data:`FAILURES_PER_ACCOUNT_AND_CLIENT`): one address guesses an account's
  password a few times a window, and the account's owner, signing in from elsewhere, is not refused for it;
- per client address (:data:`FAILURES_PER_CLIENT`): one address sprays few guesses over many accounts;
- per account (:data:`FAILURES_PER_ACCOUNT`): many addresses together guess one account's password at most this
  often. It is ten addresses' worth, so locking the owner out takes an attacker at least that many addresses.

The client address is :func:`~switchyard.platform.http.client_address.client_address`'s (``X-Forwarded-For``
only from ``SWITCHYARD_TRUSTED_PROXIES``). The limiter is the process's own (the admission's: in Redis when
``SWITCHYARD_REDIS_URL`` is set), so every API process counts the same attempts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from litestar import Request

from switchyard.platform.http.client_address import client_address
from switchyard.platform.limits import RateLimiter

__all__ = [
    "FAILURES_PER_ACCOUNT",
    "FAILURES_PER_ACCOUNT_AND_CLIENT",
    "FAILURES_PER_CLIENT",
    "FAILURE_WINDOW_S",
    "Attempt",
    "spend_attempt",
]

FAILURES_PER_ACCOUNT_AND_CLIENT = 5  # failed attempts per account per client address per window
FAILURES_PER_CLIENT = 30  # failed attempts per client address per window, all accounts together
FAILURES_PER_ACCOUNT = 10 * FAILURES_PER_ACCOUNT_AND_CLIENT  # failed attempts per account per window, all addresses
FAILURE_WINDOW_S = 300.0


@dataclass
class Attempt:
    """One password attempt's spending: refused (``retry_after_s``, nothing spent) or counted until ``succeeded``."""

    limiter: RateLimiter
    client: str
    """The client address the attempt was counted against."""
    spent: list[tuple[str, int]] = field(default_factory=list)
    refused_by: str | None = None
    """Which allowance refused it: ``client``, ``account_and_client`` or ``account``."""
    retry_after_s: int = 0

    async def succeeded(self) -> None:
        """A success does not count against the allowances."""
        for key, rate in self.spent:
            await self.limiter.refund(key, rate=rate, period_s=FAILURE_WINDOW_S)


async def spend_attempt(request: Request[Any, Any, Any], kind: str, email: str) -> Attempt:
    """Spend one attempt of ``kind`` (``console-sign-in``, ``operator-sign-in``) at ``email``'s password from
    this request's client; raises ``LimitsUnavailable`` when the limiter cannot be reached."""
    limiter: RateLimiter = request.app.state.gateway.admission.rates
    client = client_address(request)
    account = hashlib.sha256(email.encode()).hexdigest()[:32]
    attempt = Attempt(limiter, client)
    for by, key, rate in (
        ("client", f"{kind}:client:{client}", FAILURES_PER_CLIENT),
        ("account_and_client", f"{kind}:account-client:{account}:{client}", FAILURES_PER_ACCOUNT_AND_CLIENT),
        ("account", f"{kind}:account:{account}", FAILURES_PER_ACCOUNT),
    ):
        decision = await limiter.hit(key, rate=rate, period_s=FAILURE_WINDOW_S)
        if not decision.allowed:
            await attempt.succeeded()  # a refused attempt spends nothing
            attempt.spent.clear()
            attempt.refused_by, attempt.retry_after_s = by, int(decision.retry_after_s) + 1
            return attempt
        attempt.spent.append((key, rate))
    return attempt
