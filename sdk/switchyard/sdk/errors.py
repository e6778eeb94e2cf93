"""Errors raised by the SDK: one class per kind of failure, each carrying the API's error envelope.

Every 4xx and 5xx answer of the API is ``{"error": {"message", "type", "param", "code"}}``; ``APIStatusError``
and its subclasses expose those fields, the HTTP status and the request id (quote it in bug reports).
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceededError",
    "ConflictError",
    "InternalServerError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "SwitchyardError",
    "UnprocessableEntityError",
]


class SwitchyardError(Exception):
    """Base class of every error the SDK raises."""


class APIConnectionError(SwitchyardError):
    """The API could not be reached (refused, reset, DNS), after the retries."""


class APITimeoutError(APIConnectionError):
    """The API did not answer within the timeout, after the retries."""


class APIStatusError(SwitchyardError):
    """The API answered with an error status; the fields come from its error envelope."""

    def __init__(self, response: httpx.Response, body: Any) -> None:
        error = body.get("error") if isinstance(body, dict) else None
        error = error if isinstance(error, dict) else {}
        self.response = response
        self.status_code = response.status_code
        self.message: str = str(error.get("message") or response.reason_phrase or "error")
        self.type: str | None = error.get("type")
        self.param: str | None = error.get("param")
        self.code: str | None = error.get("code")
        self.request_id: str | None = response.headers.get("x-request-id")
        super().__init__(f"{self.status_code} {self.code or self.type or 'error'}: {self.message}")


class BadRequestError(APIStatusError):
    """400: the request is invalid; ``param`` names the field."""


class AuthenticationError(APIStatusError):
    """401: the key is missing, unknown, revoked or expired."""


class BudgetExceededError(APIStatusError):
    """402: a budget cannot cover the request's estimated maximum cost."""


class PermissionDeniedError(APIStatusError):
    """403: the key's role is too low for this operation."""


class NotFoundError(APIStatusError):
    """404: no such object in the key's tenant."""


class ConflictError(APIStatusError):
    """409: the object's state does not allow this now (e.g. a run already active on the thread)."""


class UnprocessableEntityError(APIStatusError):
    """422: e.g. an ``Idempotency-Key`` reused with another body."""


class RateLimitError(APIStatusError):
    """429: a rate or concurrency limit; ``retry_after_s`` says when to try again, if the API said."""

    @property
    def retry_after_s(self) -> float | None:
        value = self.response.headers.get("retry-after")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None


class InternalServerError(APIStatusError):
    """5xx: the API or one of its upstreams failed."""


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    402: BudgetExceededError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def status_error(response: httpx.Response, body: Any) -> APIStatusError:
    """The error class for an error answer (``body`` is its decoded JSON, or ``None``)."""
    if response.status_code >= 500:
        return InternalServerError(response, body)
    return _BY_STATUS.get(response.status_code, APIStatusError)(response, body)
