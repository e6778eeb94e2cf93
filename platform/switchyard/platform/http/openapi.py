"""The OpenAPI document as the server's contract, served at ``/schema/openapi.json``.

Litestar derives the paths, parameters and operation ids from the route handlers. :class:`ApiContract` completes
the document so that a client generated from it, or a fuzzer checking the server against it, finds what the server
does:

- every error status a route can answer is listed with the error envelope (``{"error": {...}}``) as its body. The
  statuses are derived in one place, :func:`error_statuses`, from what the route is: authenticated or public, its
  parameters and body, POST (``Idempotency-Key``), and the exceptions it declares with Litestar's ``raises=`` (its
  own refusals: 402 and 429 for routes that admit model calls, 409 for state conflicts);
- request and response bodies are pydantic's own JSON Schema of the models the server validates and answers with
  (validation mode for bodies: ``extra="forbid"`` is ``additionalProperties: false``, patterns and bounds are
  there; serialization mode for answers), instead of Litestar's re-derivation of them;
- a route answering in several media types (JSON or server-sent events, CSV, HTML) declares them with
  :func:`answers`;
- what the server checks beyond its models is said too: every bound of a parameter, a tagged union's tag,
  no U+0000 in any text of a request;
- public routes need no key (``security: []``), and every POST takes an optional ``Idempotency-Key`` header;
- links lead from what a route answers to the routes that take it (``openapi_links``).

It also serves the docs page, Swagger UI from this server's own files (:data:`VIEWER_ASSETS`).
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from litestar import MediaType, Response
from litestar.config.app import AppConfig
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, OpenAPI, SecurityScheme
from litestar.params import BodyKwarg, ParameterKwarg
from litestar.plugins import InitPlugin, ReceiveRoutePlugin
from litestar.routes import BaseRoute, HTTPRoute
from litestar.static_files import create_static_files_router
from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import CoreSchema

from switchyard.platform.http.errors import ErrorEnvelope
from switchyard.platform.http.openapi_links import add_links

__all__ = [
    "ERROR_DESCRIPTIONS",
    "VIEWER_ASSETS",
    "Answers",
    "ApiContract",
    "answers",
    "error_statuses",
    "viewer_assets",
]

SCHEMAS = "#/components/schemas/"

ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "The request is malformed or a value is invalid (`invalid_request_error`); `param` names the culprit.",
    401: "No API key, or a malformed, unknown, revoked or expired one (`authentication_error`).",
    402: "A hard budget would be exceeded by the request's estimated maximum cost (`insufficient_quota`).",
    403: "The key's role, or its kind (tenant or operator key), may not do this (`permission_error`).",
    404: "No such resource in the caller's tenant (`not_found_error`).",
    408: "The request body did not arrive within `SWITCHYARD_REQUEST_BODY_TIMEOUT_SECONDS` (`request_timeout`).",
    409: "The resource's state forbids this now, or a request with this `Idempotency-Key` is still in progress "
    "(`conflict_error`).",
    413: "The request body is larger than `SWITCHYARD_MAX_REQUEST_BODY_BYTES` (`request_too_large`); an upload's file "
    "larger than `SWITCHYARD_MAX_FILE_BYTES` (`file_too_large`), or past the tenant's "
    "`SWITCHYARD_MAX_TENANT_FILE_BYTES` (`file_storage_exceeded`).",
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
    - parameters or a body: 400 (a bad value, or text holding U+0000); a path parameter: 404 (not in the caller's
      tenant);
    - a body, or any POST (the idempotency layer reads it): 408 (it did not arrive in time), 413 (too large);
    - a POST: 400 (an ``Idempotency-Key`` too long), 409 (the same key in flight), 422 (the same key, another body);
    - and the status of each exception the handler declares with ``raises=``.
    """
    statuses = {exception.status_code for exception in handler.raises or ()}
    if handler.opt.get("access") != "public":
        statuses |= {401, 403, 503}
    places = {parameter["in"] for parameter in operation.get("parameters", [])}
    if places or "requestBody" in operation:
        statuses.add(400)
    if "path" in places:
        statuses.add(404)
    if "requestBody" in operation or method == "post":
        statuses |= {408, 413}
    if method == "post":
        statuses |= {400, 409, 422}
    return sorted(statuses)


def _error_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": ERROR_DESCRIPTIONS[status],
        "content": {"application/json": {"schema": {"$ref": f"{SCHEMAS}ErrorEnvelope"}}},
    }
    if status in (429, 503):
        response["headers"] = _RETRY_AFTER
    return response


@dataclass
class Answers(ResponseSpec):
    """A success answer in several media types: ``media_types`` maps each one to the type of its body."""

    media_types: dict[str, Any] = field(default_factory=dict)


def answers(status: int, description: str, media_types: dict[str, Any]) -> dict[int, ResponseSpec]:
    """The ``responses=`` of a route whose success answer comes in several media types (the first is the default).

    For ``text/event-stream`` the type is that of each event's JSON ``data``; a stream may end with ``[DONE]``.
    """
    first = next(iter(media_types.items()))
    return {
        status: Answers(data_container=first[1], media_type=first[0], description=description, media_types=media_types)
    }


def _answer_types(handler: HTTPRouteHandler) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each success status of the route: its description (``""``: Litestar's) and the body type per media type."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    returned = handler.parsed_fn_signature.return_type
    if not returned.is_subclass_of(Response):  # a Response is described by the route's responses=
        found[str(handler.status_code)] = ("", {_media_type(handler.media_type): returned.annotation})
    for status, spec in (handler.responses or {}).items():
        media = spec.media_types if isinstance(spec, Answers) else {_media_type(spec.media_type): spec.data_container}
        found[str(status)] = (spec.description, media)
    return found


_BOUNDS = {
    "ge": "minimum",
    "gt": "exclusiveMinimum",
    "le": "maximum",
    "lt": "exclusiveMaximum",
    "min_length": "minLength",
    "max_length": "maxLength",
    "pattern": "pattern",
}


def _complete_parameters(handler: HTTPRouteHandler, parameters: list[dict[str, Any]]) -> None:
    """Every bound the route declares on a parameter: Litestar's document leaves out a bound of 0."""
    declared: dict[str, ParameterKwarg] = {}
    for field_definition in handler.parsed_fn_signature.parameters.values():
        kwarg = field_definition.kwarg_definition
        if isinstance(kwarg, ParameterKwarg):
            declared[kwarg.name or kwarg.query or kwarg.header or field_definition.name] = kwarg
    for parameter in parameters:
        kwarg = declared.get(parameter["name"])
        for attribute, keyword in _BOUNDS.items():
            if kwarg is not None and getattr(kwarg, attribute) is not None:
                parameter["schema"][keyword] = getattr(kwarg, attribute)


def _media_type(value: MediaType | str) -> str:
    return value.value if isinstance(value, MediaType) else value


def _event_stream(data: dict[str, Any]) -> dict[str, Any]:
    """One server-sent event (Open API 3.1 describes an event stream by its events): JSON ``data``, or ``[DONE]``."""
    json_data = {"type": "string", "contentMediaType": "application/json", "contentSchema": data}
    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {"type": "string"},
            "id": {"type": "string"},
            "data": {"anyOf": [json_data, {"const": "[DONE]"}]},
        },
    }


class _Titles(GenerateJsonSchema):
    """Model titles only: a property's title would repeat its name."""

    def field_title_should_be_set(self, schema: CoreSchema) -> bool:
        return False


MAX_KEY_LENGTH = 255
"""The longest ``Idempotency-Key`` accepted (``idempotency.py`` refuses a longer one)."""

_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Retry safely: a retry with the same key and body gets the first answer again "
    "(`idempotent-replayed: true`); stored for 24 hours.",
    "schema": {"type": "string", "maxLength": MAX_KEY_LENGTH},
}


VIEWER_ASSETS = "/schema/assets"
"""Where the docs page (``/schema``) loads Swagger UI from: this server, so it works without the internet."""


def viewer_assets() -> Path:
    """Swagger UI's files as the ``swagger-ui-py`` package ships them (found without importing it)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the docs viewer needs the swagger-ui-py package")
    return Path(spec.submodule_search_locations[0]) / "static"


class ApiContract(InitPlugin, ReceiveRoutePlugin):
    """Serves the OpenAPI document (``/schema/openapi.json``) and its docs page (``/schema``, Swagger UI from
    :data:`VIEWER_ASSETS`), and makes the document describe what the server does (see the module)."""

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
            render_plugins=[
                SwaggerRenderPlugin(
                    path=["/", "/swagger"],
                    js_url=f"{VIEWER_ASSETS}/swagger-ui-bundle.js",
                    css_url=f"{VIEWER_ASSETS}/swagger-ui.css",
                    standalone_preset_js_url=f"{VIEWER_ASSETS}/swagger-ui-standalone-preset.js",
                    favicon=f"<link rel='icon' type='image/png' href='{VIEWER_ASSETS}/favicon-32x32.png'>",
                )
            ],
            components=Components(
                security_schemes={"ApiKey": SecurityScheme(type="http", scheme="bearer", description="`sy_...` key")}
            ),
            security=[{"ApiKey": []}],
            contract=self,
        )
        app_config.route_handlers.append(
            create_static_files_router(path=VIEWER_ASSETS, directories=[viewer_assets()], include_in_schema=False)
        )
        return app_config

    def receive_route(self, route: BaseRoute) -> None:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                for method in handler.http_methods:
                    self._handlers[(route.path_format, method.lower())] = handler

    def complete(self, document: dict[str, Any]) -> dict[str, Any]:
        """Add to Litestar's ``document`` what it cannot derive: see the module docstring."""
        bodies: list[tuple[dict[str, Any], str, Any, JsonSchemaMode]] = []  # (media type object, its name, type, mode)
        for path, method, operation in _operations(document):
            handler = self._handlers[(path, method)]
            if handler.opt.get("access") == "public":
                operation["security"] = []
            if method == "post":
                operation["parameters"] = [*operation.get("parameters", []), copy.deepcopy(_IDEMPOTENCY_KEY)]
            _complete_parameters(handler, operation.get("parameters", []))
            data = handler.parsed_fn_signature.parameters.get("data")
            if data is not None:
                media: dict[str, Any] = {}
                kwarg = data.kwarg_definition
                body_type = _media_type(kwarg.media_type) if isinstance(kwarg, BodyKwarg) else "application/json"
                operation["requestBody"]["content"] = {body_type: media}  # JSON, or a form (an upload)
                bodies.append((media, body_type, data.annotation, "validation"))
            responses = operation["responses"]
            for status, (description, types) in _answer_types(handler).items():
                response = responses.setdefault(status, {})
                response["description"] = description or response.get("description", "")
                response["content"] = {media_type: {} for media_type in types}
                bodies += [(response["content"][name], name, tp, "serialization") for name, tp in types.items()]
            for code in [code for code in responses if code[0] in "45"]:
                del responses[code]  # Litestar's own error bodies: this server never sends them
            for error in error_statuses(handler, method, operation):
                responses[str(error)] = _error_response(error)
        wanted = [*dict.fromkeys((tp, mode) for _, _, tp, mode in bodies), (ErrorEnvelope, "serialization")]
        schemas, definitions = TypeAdapter.json_schemas(
            [((tp, mode), mode, TypeAdapter(tp)) for tp, mode in wanted],
            ref_template=SCHEMAS + "{model}",
            schema_generator=_Titles,
        )
        for media, name, tp, mode in bodies:
            schema = schemas[((tp, mode), mode)]
            media["schema"] = _event_stream(schema) if name == "text/event-stream" else schema
        components = definitions.get("$defs", {})
        _require_tags(components)
        _forbid_nul(document, components)
        document.setdefault("components", {})["schemas"] = components
        add_links(document, _operations(document))
        return document


def _require_tags(components: dict[str, Any]) -> None:
    """The server reads a tagged union's tag from the body, so every variant requires it (pydantic's JSON Schema has
    it optional where the variant gives it a default: ``{"name": "x"}`` is not a ``function`` tool)."""
    for node in _nodes(components):
        discriminator = node.get("discriminator")
        if isinstance(discriminator, dict):
            for ref in discriminator.get("mapping", {}).values():
                variant = components[ref.removeprefix(SCHEMAS)]
                variant["required"] = sorted({*variant.get("required", []), discriminator["propertyName"]})


NO_NUL = r"^[^\u0000]*$"


def _forbid_nul(document: dict[str, Any], components: dict[str, Any]) -> None:
    """The server refuses text holding U+0000 anywhere in a request (PostgreSQL cannot store it): every string a
    request carries, and every key of its objects, says so."""
    requests = [
        node
        for _, _, operation in _operations(document)
        for node in [*operation.get("parameters", []), operation.get("requestBody", {})]
    ]
    names, seen = _refs(requests), set[str]()
    while names - seen:
        name = (names - seen).pop()
        seen.add(name)
        names |= _refs(components[name])
    for node in _nodes([*requests, *(components[name] for name in seen)]):
        if node.get("type") == "string" and not {"enum", "const", "format"} & node.keys():
            pattern = node.get("pattern")
            if pattern is None:
                node["pattern"] = NO_NUL
            elif pattern.startswith("^") and not pattern.endswith("$"):  # a prefix: the rest is free text
                node["pattern"] = pattern + r"[^\u0000]*$"
        if node.get("type") == "object" and node.get("additionalProperties", False) is not False:
            node["propertyNames"] = {"pattern": NO_NUL}


def _refs(value: Any) -> set[str]:
    """The components ``value`` refers to."""
    return {ref.removeprefix(SCHEMAS) for node in _nodes(value) if isinstance(ref := node.get("$ref"), str)}


def _nodes(value: Any) -> Iterable[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _nodes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _nodes(item)


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
