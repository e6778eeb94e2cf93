"""Refusals of admission beyond the plain 4xx: those that time cures, and those the platform is to blame for.

They are API errors, so a chat completion answers them as they are; an agent run waits out :class:`TryLater`
and :class:`LimitsOutage` and fails with the code of any other.
"""

from __future__ import annotations

from switchyard.platform.http.errors import InvalidRequest, RateLimited, ServiceUnavailable

__all__ = ["LIMITS_RETRY_AFTER_S", "LimitsOutage", "NoRateCard", "RequestExceedsTokenLimit", "TryLater"]

LIMITS_RETRY_AFTER_S = 2  # asked of clients refused because the limiters' Redis is unreachable


class RequestExceedsTokenLimit(InvalidRequest):
    """400: the call needs more tokens than its tenant's whole per-minute limit, so it can never be admitted."""

    default_code = "request_exceeds_token_limit"


class TryLater(RateLimited):
    """429: a limit refuses the call now and will allow it later.

    ``retry_after_s`` is when the refusing rate would allow it; ``None`` for a request slot, which frees when
    another request of the tenant ends.
    """

    def __init__(self, message: str, *, code: str, retry_after_s: float | None, headers: dict[str, str]) -> None:
        super().__init__(message, code=code, headers=headers)
        self.retry_after_s = retry_after_s


class LimitsOutage(ServiceUnavailable):
    """503 with ``retry-after``: the limiters' Redis is unreachable, so admission can neither admit nor refuse."""

    default_code = "limits_unavailable"

    def __init__(self) -> None:
        super().__init__(
            "request limits cannot be checked right now; retry shortly",
            headers={"retry-after": str(LIMITS_RETRY_AFTER_S)},
        )


class NoRateCard(ServiceUnavailable):
    """503: no rate card prices the call, so its budget hold cannot be priced (an operator must add one)."""

    default_code = "no_rate_card"
