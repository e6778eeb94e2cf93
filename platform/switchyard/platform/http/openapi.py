"""The OpenAPI document as the server's contract, served at ``/schema/openapi.json``.

Litestar derives the paths, parameters and operation ids from the route handlers. :class:`ApiContract` completes
the document so that a client generated from it, or a fuzzer checking the server against it, finds what the server
does:

- every error status a route can answer is listed with the error envelope (``{"error": {...}}``) as its body. The
  statuses are derived in one place, :func:`error_statuses`, from what the route is: authenticated or public, its
  parameters and body, POST (``Idempotency-Key``), and the exceptions it declares with Litestar's ``raises=`` (its
  own refusals: 402 and 429 for routes that admit model calls, 409 for state conflicts);
- public routes need no key (``security: []``), and every POST takes an optional ``Idempotency-Key`` header.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from litestar.config.app import AppConfig
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import ScalarRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, OpenAPI, SecurityScheme
from litestar.plugins import InitPlugin, ReceiveRoutePlugin
from litestar.routes import BaseRoute, HTTPRoute
from pydantic import TypeAdapter

from switchyard.platform.http.errors import ErrorEnvelope
from switchyard.platform.http.idempotency import MAX_KEY_LENGTH

__all__ = ["ERROR_DESCRIPTIONS", "ApiContract", "error_statuses"]

SCHEMAS = "#/components/schemas/"

ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "The request is malformed or a value is invalid (`invalid_request_error`); `param` names the culprit.",
    401: "No API key, or a malformed, unknown, revoked or expired one (`authentication_error`).",
    402: "A hard budget would be exceeded by the request's estimated maximum cost (`insufficient_quota`).",
    403: "The key's role, or its kind (tenant or operator key), may not do this (`permission_error`).",
    404: "No such resource in the caller's tenant (`not_found_error`).",
    409: "The resource's state forbids this now, or a request with this `Idempotency-Key` is still in progress "
    "(`conflict_error`).",
    413: "The request body is larger than `SWITCHYARD_MAX_REQUEST_BODY_BYTES` (`request_too_large`).",
    422: "This `Idempotency-Key` was already used with a different request (`idempotency_key_reused`).",
    429: "A rate or concurrency limit is reached (`rate_limit_error`); `retry-after` says when to try again.",
    503: "The database, the limiters or the fleet cannot be reached; nothing was changed, retry after `retry-after`.",
}
"""What each error status means, for every route that can answer it."""

_RETRY_AFTER = {
    "retry-after": {"description": "Seconds to wait before retrying.", "schema": {"type": "string"}},
}


def error_statuses(handler: HTTPRouteHandler, method: str, operation: dict[str, Any]) -> list[int]:
    """Every error status the route of ``operation`` can answer.

    - an authenticated route: 401 (no or bad key), 403 (role or kind of key), 503 (the key lookup and the unit of
      work need the database);
    - query or header parameters or a body: 400; a path parameter: 404 (not in the caller's tenant);
    - a body, or any POST (the idempotency layer reads it): 413;
    - a POST: 400 (an ``Idempotency-Key`` too long), 409 (the same key in flight), 422 (the same key, another body);
    - and the status of each exception the handler declares with ``raises=``.
    """
    statuses = {exception.status_code for exception in handler.raises or ()}
    if handler.opt.get("access") != "public":
        statuses |= {401, 403, 503}
    places = {parameter["in"] for parameter in operation.get("parameters", [])}
    if places - {"path"} or "requestBody" in operation:
        statuses.add(400)
    if "path" in places:
        statuses.add(404)
    if "requestBody" in operation:
        statuses.add(413)
    if method == "post":
        statuses |= {400, 409, 413, 422}
    return sorted(statuses)


def _error_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": ERROR_DESCRIPTIONS[status],
        "content": {"application/json": {"schema": {"$ref": f"{SCHEMAS}ErrorEnvelope"}}},
    }
    if status in (429, 503):
        response["headers"] = _RETRY_AFTER
    return response


_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Retry safely: a retry with the same key and body gets the first answer again "
    "(`idempotent-replayed: true`); stored for 24 hours.",
    "schema": {"type": "string", "maxLength": MAX_KEY_LENGTH},
}


class ApiContract(InitPlugin, ReceiveRoutePlugin):
    """Serves the OpenAPI document (``/schema``) and makes it describe what the server does (see the module)."""

    __slots__ = ("_description", "_handlers", "_title", "_version")

    def __init__(self, *, title: str, version: str, description: str) -> None:
        self._title = title
        self._version = version
        self._description = description
        self._handlers: dict[tuple[str, str], HTTPRouteHandler] = {}

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.openapi_config = _ContractConfig(
            title=self._title,
            version=self._version,
            description=self._description,
            path="/schema",
            render_plugins=[ScalarRenderPlugin(), SwaggerRenderPlugin(path="/swagger")],
            components=Components(
                security_schemes={"ApiKey": SecurityScheme(type="http", scheme="bearer", description="`sy_...` key")}
            ),
            security=[{"ApiKey": []}],
            contract=self,
        )
        return app_config

    def receive_route(self, route: BaseRoute) -> None:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                for method in handler.http_methods:
                    self._handlers[(route.path_format, method.lower())] = handler

    def complete(self, document: dict[str, Any]) -> dict[str, Any]:
        """Add to Litestar's ``document`` what it cannot derive: see the module docstring."""
        _, definitions = TypeAdapter.json_schemas(
            [("ErrorEnvelope", "serialization", TypeAdapter(ErrorEnvelope))], ref_template=SCHEMAS + "{model}"
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        schemas.update(definitions.get("$defs", {}))
        for path, method, operation in _operations(document):
            handler = self._handlers[(path, method)]
            if handler.opt.get("access") == "public":
                operation["security"] = []
            if method == "post":
                operation["parameters"] = [*operation.get("parameters", []), _IDEMPOTENCY_KEY]
            responses = operation["responses"]
            for status in [code for code in responses if code[0] in "45"]:
                del responses[status]  # Litestar's own error bodies: this server never sends them
            for status in error_statuses(handler, method, operation):
                responses[str(status)] = _error_response(status)
        return document


def _operations(document: dict[str, Any]) -> Iterable[tuple[str, str, dict[str, Any]]]:
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            yield path, method, operation


@dataclass
class _ContractConfig(OpenAPIConfig):
    """Litestar's OpenAPI settings, building a document that :class:`ApiContract` completes when it is rendered."""

    contract: ApiContract | None = None

    def to_openapi_schema(self) -> OpenAPI:
        base = super().to_openapi_schema()
        return _ContractDocument(**{f.name: getattr(base, f.name) for f in fields(base)}, contract=self.contract)


@dataclass
class _ContractDocument(OpenAPI):
    contract: ApiContract | None = field(default=None, repr=False, compare=False)

    @property
    def _exclude_fields(self) -> set[str]:
        return {"contract"}

    def to_schema(self) -> dict[str, Any]:
        document = super().to_schema()
        return self.contract.complete(document) if self.contract is not None else document
