"""The error envelope ``{"error": {"message", "type", "param", "code"}}`` and the exceptions that produce it."""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    SerializationException,
    ValidationException,
)
from litestar.params import ParameterKwarg
from litestar.types import ExceptionHandlersMap
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError, OperationalError

__all__ = [
    "ApiError",
    "AuthenticationFailed",
    "Conflict",
    "ErrorBody",
    "ErrorEnvelope",
    "InvalidRequest",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "RequestTimeout",
    "ServiceUnavailable",
    "exception_handlers",
]

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorEnvelope(BaseModel):
    """Every 4xx and 5xx response has this body."""

    error: ErrorBody


class ApiError(HTTPException):
    """An error the API reports on purpose; subclasses fix the status and ``type``."""

    status_code = 400
    error_type = "invalid_request_error"
    default_code: str | None = None

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(detail=message, status_code=self.status_code, headers=headers)
        self.message = message
        self.param = param
        self.code = code or self.default_code


class InvalidRequest(ApiError):
    status_code = 400


class AuthenticationFailed(ApiError, NotAuthorizedException):
    status_code = 401
    error_type = "authentication_error"
    default_code = "invalid_api_key"


class PermissionDenied(ApiError):
    status_code = 403
    error_type = "permission_error"
    default_code = "insufficient_role"


class NotFound(ApiError):
    status_code = 404
    error_type = "not_found_error"
    default_code = "not_found"


class Conflict(ApiError):
    status_code = 409
    error_type = "conflict_error"


class RequestTimeout(ApiError):
    """The request's body did not arrive in time."""

    status_code = 408
    default_code = "request_timeout"


class RateLimited(ApiError):
    status_code = 429
    error_type = "rate_limit_error"
    default_code = "rate_limit_exceeded"


class ServiceUnavailable(ApiError):
    status_code = 503
    error_type = "api_error"


_TYPES_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def error_response(
    status_code: int,
    message: str,
    *,
    error_type: str | None = None,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response[dict[str, Any]]:
    kind = error_type or _TYPES_BY_STATUS.get(
        status_code, "api_error" if status_code >= 500 else "invalid_request_error"
    )
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return Response(body, status_code=status_code, media_type=MediaType.JSON, headers=headers)


def _wire_name(request: Request[Any, Any, Any], problem: dict[str, Any]) -> str | None:
    """The name the client sent: a handler argument may read a parameter of another name (``format``, ``page``)."""
    key = problem.get("key") or None
    handler = request.scope.get("route_handler")
    if key is None or problem.get("source") == "body" or handler is None:
        return key
    field = handler.parsed_fn_signature.parameters.get(key)
    kwarg = field.kwarg_definition if field is not None else None
    return kwarg.name if isinstance(kwarg, ParameterKwarg) and kwarg.name else key


def _validation_message(request: Request[Any, Any, Any], exc: ValidationException) -> tuple[str, str | None]:
    extra = exc.extra if isinstance(exc.extra, list) else []
    problems = [item for item in extra if isinstance(item, dict)]
    if not problems:
        return str(exc.detail), None
    names = [_wire_name(request, problem) for problem in problems]
    parts = [f"{name or 'body'}: {problem.get('message')}" for name, problem in zip(names, problems, strict=True)]
    return "invalid request: " + "; ".join(parts), names[0]


def _handle_http_exception(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    headers = dict(exc.headers or {})
    if isinstance(exc, ApiError):
        return error_response(
            exc.status_code,
            exc.message,
            error_type=exc.error_type,
            param=exc.param,
            code=exc.code,
            headers=headers,
        )
    if isinstance(exc, ValidationException):
        message, param = _validation_message(request, exc)
        return error_response(400, message, param=param, code="invalid_value", headers=headers)
    if isinstance(exc.__cause__, SerializationException):
        return error_response(400, f"malformed JSON body: {exc.detail}", code="invalid_json", headers=headers)
    code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(exc.status_code)
    message = str(exc.detail)
    if exc.status_code == 404 and message == "Not Found":
        message = "no such route"
    return error_response(exc.status_code, message, code=code, headers=headers)


def _handle_database_unavailable(_request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """The database dropped or refused the connection (a restart, a failover, a terminated session): nothing was
    committed, and a retry gets a new connection."""
    log.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return error_response(
        503,
        "the database is unavailable; nothing was changed, retry shortly",
        error_type="api_error",
        code="database_unavailable",
        headers={"retry-after": "1"},
    )


def _handle_unexpected(_request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    if isinstance(exc, DBAPIError) and (exc.connection_invalidated or isinstance(exc, OperationalError)):
        return _handle_database_unavailable(_request, exc)
    log.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal server error", error_type="api_error", code="internal_error")


exception_handlers: ExceptionHandlersMap = {
    HTTPException: _handle_http_exception,
    OperationalError: _handle_database_unavailable,
    Exception: _handle_unexpected,
}
