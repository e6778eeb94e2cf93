"""The tenant-isolation matrix, generated from the OpenAPI schema: every operation, every way to be refused.

For each operation: no key, a revoked key and an expired key get 401; a role below the declared one (or the
wrong kind of key) gets 403; another tenant's ids get 404; and the caller's own ids work (the positive control
that keeps the 404s honest). New routes join the matrix automatically; the meta-tests fail when a route cannot
be exercised (no access declaration, no factory for a path parameter, no example for a required field).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from switchyard.platform.auth import Role
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import ApiKey, OperatorKey
from tests.platform.agents_api.factories import AGENT_FACTORIES
from tests.platform.billing.factories import BILLING_FACTORIES
from tests.platform.knowledge.vector_stores_factories import VECTOR_STORE_FACTORIES
from tests.platform.responses.factories import RESPONSE_FACTORIES
from tests.support.api_schema import openapi_document, routes_app

_APP = routes_app()
_SCHEMA = openapi_document()
_DOCS_PATH = "/schema"
_ROLES = [Role.VIEWER, Role.DEVELOPER, Role.ADMIN, Role.OWNER]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    access: str
    request_schema: dict[str, Any] | None
    form: bool = False  # the body is multipart/form-data (an upload), not JSON

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)

    @property
    def body_refs(self) -> list[str]:
        """Required body fields naming another resource (``agent_id``): made by their factory, like path ids."""
        return [name for name in (self.request_schema or {}).get("required", []) if name in BODY_REFS]

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _access_by_route() -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for route in _APP.routes:
        if route.path.startswith(_DOCS_PATH):
            continue  # the OpenAPI document and its viewers are public by design
        for handler in getattr(route, "route_handlers", []):
            if not handler.resolve_include_in_schema() or handler.http_methods == {"OPTIONS"}:
                continue
            path = re.sub(r"{(\w+):\w+}", r"{\1}", route.path)
            for method in handler.http_methods:
                found[(method, path)] = str(handler.opt.get("access", ""))
    return found


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    return dict(_SCHEMA["components"]["schemas"][ref.rsplit("/", 1)[1]])


def _operations() -> list[Operation]:
    access = _access_by_route()
    operations = []
    for path, item in _SCHEMA["paths"].items():
        for method, spec in item.items():
            content = spec.get("requestBody", {}).get("content", {})
            form = "multipart/form-data" in content
            body = content.get("multipart/form-data" if form else "application/json", {}).get("schema")
            operations.append(
                Operation(method.upper(), path, access.get((method.upper(), path), ""), body and _resolve(body), form)
            )
    return operations


OPERATIONS = _operations()


def _example(prop: dict[str, Any]) -> Any:
    """A field's declared example, or the first value of an enum it refers to (a binary one: a file); ``None`` if it
    has neither."""
    if prop.get("examples"):
        return prop["examples"][0]
    if prop.get("format") == "binary":
        return b"example"
    for ref in prop.get("allOf", []) + prop.get("anyOf", []) + [prop]:
        enum = _resolve(ref).get("enum")
        if enum:
            return enum[0]
    return None


def _example_body(operation: Operation, ids: dict[str, str] | None = None) -> dict[str, Any] | None:
    if operation.request_schema is None:
        return None
    properties = operation.request_schema.get("properties", {})
    ids = ids or {}
    return {
        name: ids[name] if name in ids else _example(properties[name])
        for name in operation.request_schema.get("required", [])
    }


# ---- factories: one per path parameter, making a resource in the given tenant ----

Factory = Callable[[Any, Any], Awaitable[str]]


async def _member(client: Any, tenant: Any) -> str:
    response = await client.post(
        "/v1/members", json={"email": f"m{id(tenant) % 10**6}@x.io", "role": "viewer"}, headers=tenant.headers()
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _api_key(client: Any, tenant: Any) -> str:
    response = await client.post("/v1/api-keys", json={"role": "viewer"}, headers=tenant.headers())
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _tenant(client: Any, tenant: Any) -> str:
    return str(tenant.id)


async def _model(client: Any, tenant: Any) -> str:
    response = await client.get("/v1/models", headers=tenant.headers("viewer"))
    return str(response.json()["data"][0]["id"])


FACTORIES: dict[str, Factory] = {"member_id": _member, "key_id": _api_key, "tenant_id": _tenant, "model_id": _model}

# Resources shared by every tenant (the served models): "another tenant's id" is then one that does not exist.
SHARED: dict[str, str] = {"model_id": "no-such/model"}

FACTORIES.update(BILLING_FACTORIES)  # budget_id, invoice_id, rate_card_id
FACTORIES.update(AGENT_FACTORIES)  # agent_id, thread_id, run_id, workflow_id, nodes (a workflow's, naming an agent)
FACTORIES.update(RESPONSE_FACTORIES)  # response_id, conversation_id, item_id
FACTORIES.update(VECTOR_STORE_FACTORIES)  # vector_store_id, file_id (a file attached to that store), batch_id
BODY_REFS = {"agent_id", "nodes", "file_id"}


# ---- meta-tests: the matrix covers every route ----


def test_every_route_is_in_the_schema_and_declares_its_access() -> None:
    in_schema = {(op.method, op.path) for op in OPERATIONS}
    assert set(_access_by_route()) == in_schema
    undeclared = [str(op) for op in OPERATIONS if op.access not in {"public", "operator", *map(str, _ROLES)}]
    assert undeclared == [], "routes must declare opt=access(...)"


def test_every_path_parameter_has_a_factory_and_every_required_field_an_example() -> None:
    missing = [f"{op}: {p}" for op in OPERATIONS for p in op.path_params if p not in FACTORIES]
    assert missing == [], "add a factory for these path parameters to FACTORIES"
    for op in OPERATIONS:
        if op.request_schema is not None:
            properties = op.request_schema.get("properties", {})
            for name in op.request_schema.get("required", []):
                assert _example(properties[name]) is not None, (
                    f"{op}: give field {name!r} an example (Field(examples=))"
                )


def test_matrix_is_not_empty() -> None:
    assert len(OPERATIONS) >= 10


# ---- the matrix ----


async def _call(client: Any, op: Operation, ids: dict[str, str], headers: dict[str, str]) -> Any:
    path = op.path.format(**ids)
    body = _example_body(op, ids)
    if op.form and body is not None:  # a binary field is a file part
        properties = (op.request_schema or {}).get("properties", {})
        binary = {name for name, prop in properties.items() if prop.get("format") == "binary"}
        files = {name: (f"{name}.txt", b"example") for name in body if name in binary}
        data = {name: value for name, value in body.items() if name not in binary}
        return await client.request(op.method, path, files=files, data=data, headers=headers)
    return await client.request(op.method, path, json=body, headers=headers)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _disabled_keys(client: Any, op: Operation, mine: Any, operator_key: str) -> list[str]:
    """A revoked and an expired key that would otherwise be allowed to call ``op``."""
    database = client.app.state.database
    keys = []
    for column in ("revoked_at", "expires_at"):
        past = datetime.now(UTC) - timedelta(seconds=1)
        if op.access == "operator":
            from switchyard.platform.bootstrap import CLI_ACTOR
            from switchyard.platform.tenants.service import create_operator_key

            async with database.unit_of_work(UNSCOPED) as session:
                key = await create_operator_key(session, actor=CLI_ACTOR, name="disabled")
            table: Any = OperatorKey
        else:
            created = await client.post("/v1/api-keys", json={"role": op.access}, headers=mine.headers())
            key = created.json()["value"]
            table = ApiKey
        short_id = key.split("_")[1]
        async with database.unit_of_work(UNSCOPED) as session:
            await session.execute(update(table).where(table.short_id == short_id).values({column: past}))
        keys.append(key)
    return keys


def _assert_error(response: Any, status: int, op: Operation, why: str) -> None:
    assert response.status_code == status, f"{op} {why}: expected {status}, got {response.status_code} {response.text}"
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert response.headers.get("x-request-id")


@pytest.mark.parametrize("op", OPERATIONS, ids=str)
async def test_isolation(client: Any, make_tenant: Any, operator_key: str, op: Operation) -> None:
    mine, other = await make_tenant(), await make_tenant()
    if op.access == "public":
        response = await _call(client, op, {}, {})
        assert response.status_code < 400, response.text
        return

    allowed = _bearer(operator_key) if op.access == "operator" else mine.headers(op.access)
    first_ids = {p: await FACTORIES[p](client, mine) for p in op.path_params + op.body_refs}

    # 401: no key, revoked key, expired key
    _assert_error(await _call(client, op, first_ids, {}), 401, op, "without a key")
    for key in await _disabled_keys(client, op, mine, operator_key):
        _assert_error(await _call(client, op, first_ids, _bearer(key)), 401, op, "with a revoked/expired key")

    # 403: the wrong kind of key, or a role below the declared one
    if op.access == "operator":
        _assert_error(await _call(client, op, first_ids, mine.headers("owner")), 403, op, "with a tenant key")
    else:
        _assert_error(await _call(client, op, first_ids, _bearer(operator_key)), 403, op, "with an operator key")
        for role in _ROLES[: _ROLES.index(Role(op.access))]:
            _assert_error(await _call(client, op, first_ids, mine.headers(role)), 403, op, f"as {role}")

    # 404: another tenant's ids (for operators: ids that do not exist)
    if op.path_params or op.body_refs:
        if op.access == "operator":
            foreign = {p: f"{first_ids[p][:4]}01nonexistent" for p in op.path_params}
        else:
            foreign = {
                p: SHARED[p] if p in SHARED else await FACTORIES[p](client, other)
                for p in op.path_params + op.body_refs
            }
        _assert_error(await _call(client, op, foreign, allowed), 404, op, "with another tenant's ids")

    # positive control: the caller's own ids work
    response = await _call(client, op, first_ids, allowed)
    assert response.status_code < 400, f"{op} as allowed caller: {response.status_code} {response.text}"
