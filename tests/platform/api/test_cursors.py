"""Cursors on every list, generated from the OpenAPI schema: an id of the list pages it; anything else is 400.

Malformed strings, ids that do not exist and ids of another tenant's items are all answered the same way,
400 ``invalid_value`` naming ``after`` or ``before`` (top-level lists answered 200 with a page computed
from the string, thread messages and run steps 404). New list routes join automatically.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.platform.api.test_isolation_matrix import FACTORIES
from tests.platform.billing.factories import make_budget, make_invoice
from tests.support.api_schema import openapi_document, routes_app

_APP = routes_app()
_SCHEMA = openapi_document()


def _operator_paths() -> set[str]:
    found = set()
    for route in _APP.routes:
        for handler in getattr(route, "route_handlers", []):
            if "GET" in handler.http_methods and handler.opt.get("access") == "operator":
                found.add(re.sub(r"{(\w+):\w+}", r"{\1}", route.path))
    return found


_OPERATOR_PATHS = _operator_paths()
LISTS = sorted(
    path
    for path, item in _SCHEMA["paths"].items()
    if "get" in item and {"after", "before"} <= {p["name"] for p in item["get"].get("parameters", [])}
)


def test_the_lists_are_found() -> None:
    assert len(LISTS) >= 12
    assert "/v1/threads/{thread_id}/messages" in LISTS


# Lists whose items no path parameter's factory makes: the factory that puts one in them.
_FILLERS = {
    "/v1/agents": "agent_id",
    "/v1/workflows": "workflow_id",
    "/v1/threads/{thread_id}/runs": "run_id",
    "/v1/files": "file_id",
    "/v1/vector_stores": "vector_store_id",
}


async def _list_path(client: Any, tenant: Any, path: str) -> str:
    """``path`` with the ids of resources made in ``tenant`` (which also fill the lists being paged)."""
    await make_budget(client, tenant)
    await make_invoice(client, tenant)
    ids = {name: await FACTORIES[name](client, tenant) for name in re.findall(r"{(\w+)}", path)}
    if path in _FILLERS:
        await FACTORIES[_FILLERS[path]](client, tenant)
    return path.format(**ids)


def _expect_bad_cursor(response: Any, param: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_value", param)
    assert param in error["message"]


@pytest.mark.parametrize("path", LISTS)
async def test_a_cursor_must_be_an_id_of_the_list(
    client: Any, make_tenant: Any, operator_headers: dict[str, str], path: str
) -> None:
    mine, other = await make_tenant(), await make_tenant()
    operator = path in _OPERATOR_PATHS
    headers = operator_headers if operator else mine.headers()
    url = await _list_path(client, mine, path)
    first = await client.get(url, params={"limit": 1}, headers=headers)
    assert first.status_code == 200, first.text
    assert first.json()["data"], f"{path}: the factories should leave something to page"
    cursor = first.json()["first_id"]
    bad = ["zzz", "", f"{cursor[:-4]}zzzz", "' OR 1=1 --"]
    if not operator:
        theirs = await client.get(await _list_path(client, other, path), headers=other.headers())
        bad.append(theirs.json()["first_id"])
    for param in ("after", "before"):
        assert (await client.get(url, params={param: cursor}, headers=headers)).status_code == 200
        for value in bad:
            _expect_bad_cursor(await client.get(url, params={param: value}, headers=headers), param)
