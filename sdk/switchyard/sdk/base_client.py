"""What the sync and async clients share: settings, request building, retries and decoding answers.

Retries: connection failures, timeouts, 408, 409 ``idempotency_key_in_flight``, 429 and 5xx are retried with
exponential backoff and jitter, honouring ``retry-after``. Every POST carries an ``Idempotency-Key`` (generated
unless given) that stays the same across its retries, so a retried POST is applied once.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

import httpx

from switchyard.sdk.errors import APIConnectionError, APITimeoutError, SwitchyardError, status_error

__all__ = ["DEFAULT_BASE_URL", "VERSION", "BaseClient", "Call"]

VERSION = "0.1.0"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 2
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_BACKOFF_FIRST_S = 0.5
_BACKOFF_MAX_S = 8.0


@dataclass(frozen=True, slots=True)
class Call:
    """One API request, described; the clients send it (and re-send it on a retry)."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: Any = None
    idempotency_key: str | None = None
    files: Mapping[str, tuple[str, bytes, str]] | None = None
    """``multipart/form-data`` file parts (name -> filename, bytes, content type); ``body`` is then its other
    fields."""


class BaseClient:
    """Settings and the rules both clients follow; holds no connection."""

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout_s: float,
        max_retries: int,
    ) -> None:
        key = api_key or os.environ.get("SWITCHYARD_API_KEY")
        if not key:
            raise SwitchyardError("no API key: pass api_key= or set SWITCHYARD_API_KEY")
        self.api_key = key
        self.base_url = (base_url or os.environ.get("SWITCHYARD_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.timeout_s = timeout_s
        self.max_retries = max_retries

    @staticmethod
    def keyed(call: Call) -> Call:
        """``call`` with an idempotency key if it is a POST without one: every attempt then carries the same."""
        if call.method != "POST" or call.idempotency_key is not None:
            return call
        return replace(call, idempotency_key=f"sdk-{uuid.uuid4().hex}")

    def build_request(self, http: httpx.Client | httpx.AsyncClient, call: Call) -> httpx.Request:
        headers = {
            "Authorization": f"Bearer {self.api_key}",
            "User-Agent": f"switchyard-sdk/{VERSION}",
        }
        if call.idempotency_key is not None:
            headers["Idempotency-Key"] = call.idempotency_key
        params = None if call.params is None else {k: v for k, v in call.params.items() if v is not None}
        if call.files is not None:
            # the same boundary on every attempt: a retry sends the same bytes under the same Idempotency-Key
            boundary = hashlib.sha256((call.idempotency_key or "").encode()).hexdigest()
            headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
            form = {k: str(v) for k, v in (call.body or {}).items() if v is not None}
            return http.build_request(
                call.method,
                f"{self.base_url}{call.path}",
                params=params,
                data=form,
                files=dict(call.files),
                headers=headers,
                timeout=self.timeout_s,
            )
        content = None
        if call.body is not None:
            headers["Content-Type"] = "application/json"
            content = json.dumps(call.body, default=_jsonable).encode()
        return http.build_request(
            call.method,
            f"{self.base_url}{call.path}",
            params=params,
            content=content,
            headers=headers,
            timeout=self.timeout_s,
        )

    def retry_delay_s(self, attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before retry number ``attempt + 1``, or ``None`` when the answer is final.

        ``response`` is ``None`` when the request failed to connect or timed out.
        """
        if attempt >= self.max_retries:
            return None
        if response is not None and not _retryable(response):
            return None
        told = _retry_after_s(response) if response is not None else None
        if told is not None:
            return min(told, 60.0)
        backoff = min(_BACKOFF_FIRST_S * 2.0**attempt, _BACKOFF_MAX_S)
        return backoff * (0.75 + random.random() / 2)

    @staticmethod
    def transport_error(error: httpx.TransportError) -> APIConnectionError:
        if isinstance(error, httpx.TimeoutException):
            return APITimeoutError(f"the API did not answer in time: {error!r}")
        return APIConnectionError(f"could not reach the API: {error!r}")

    @staticmethod
    def decode(response: httpx.Response) -> Any:
        """The answer's JSON, or the matching ``APIStatusError`` raised for an error status."""
        BaseClient.raise_for_error(response)
        return response.json()

    @staticmethod
    def raise_for_error(response: httpx.Response) -> None:
        """Raise the ``APIStatusError`` of an error answer (whose body has been read)."""
        if response.is_success:
            return
        try:
            body = response.json()
        except ValueError:
            body = None
        raise status_error(response, body)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _retryable(response: httpx.Response) -> bool:
    if response.status_code in _RETRY_STATUSES or response.status_code >= 500:
        return True
    if response.status_code == 409:
        try:
            return bool(response.json()["error"]["code"] == "idempotency_key_in_flight")
        except (ValueError, KeyError, TypeError):
            return False
    return False


def _retry_after_s(response: httpx.Response) -> float | None:
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            continue
    return None
