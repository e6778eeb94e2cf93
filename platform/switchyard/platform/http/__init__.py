"""HTTP edge concerns shared by every domain: errors, request ids, pagination, body limits, the OpenAPI contract
(the ``Idempotency-Key`` middleware, which needs auth and audit, is ``platform/idempotency.py``)."""

from __future__ import annotations

from switchyard.platform.http.errors import (
    ApiError,
    AuthenticationFailed,
    Conflict,
    ErrorEnvelope,
    InvalidRequest,
    NotFound,
    PermissionDenied,
)
from switchyard.platform.http.pagination import CursorParams, Page, cursor_params, paginate

__all__ = [
    "ApiError",
    "AuthenticationFailed",
    "Conflict",
    "CursorParams",
    "ErrorEnvelope",
    "InvalidRequest",
    "NotFound",
    "Page",
    "PermissionDenied",
    "cursor_params",
    "paginate",
]
