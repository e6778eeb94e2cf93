"""The console's isolation matrix, generated from the app's routes under ``/console``.

For each console page and form: without a session it answers 302 to the sign-in page; each role below the
route's declared ``console_access`` gets 403 from the server; another tenant's ids get 404; and the caller's own
ids work (the positive control that keeps the 404s honest). A console route added without a declaration, or
with a path parameter that has no factory here, fails the meta-tests.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from switchyard.platform.auth import Role
from switchyard.platform.db import TenantScope
from switchyard.platform.identity.invitations import invite_member
from tests.platform.agents_api.factories import run_inline, scripted_model, wait_for_run
from tests.platform.billing.factories import BILLING_FACTORIES
from tests.platform.console.factories import PASSWORD, TEST_ACTOR, ConsoleTenant, page_csrf, sign_in
from tests.platform.knowledge.vector_stores_factories import VECTOR_STORE_FACTORIES
from tests.support.api_schema import routes_app

_APP = routes_app()
_emails = itertools.count()
_LEVELS = {"public", "signed_in", *(r.value for r in Role)}


@dataclass(frozen=True)
class ConsoleRoute:
    method: str
    path: str
    access: str

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _routes(*, operator: bool = False) -> list[ConsoleRoute]:
    """The console's routes: the tenants' pages, or (``operator``) the operator's under ``/console/operator``."""
    found = []
    for route in _APP.routes:
        if not route.path.startswith("/console") or route.path.startswith("/console/operator") != operator:
            continue
        for handler in getattr(route, "route_handlers", []):
            for method in sorted(handler.http_methods - {"OPTIONS", "HEAD"}):
                path = re.sub(r"{(\w+):\w+}", r"{\1}", route.path)
                found.append(ConsoleRoute(method, path, str(handler.opt.get("console_access", ""))))
    return sorted(found, key=str)


ROUTES = _routes()
GUARDED = [r for r in ROUTES if r.access != "public"]
OPERATOR_ROUTES = _routes(operator=True)


async def _agent(client: Any, tenant: ConsoleTenant) -> str:
    body = {"name": "matrix-agent", "model": "meta-llama/Llama-3.1-8B-Instruct", "instructions": "Hi."}
    made = await client.post("/v1/agents", json=body, headers={"Authorization": f"Bearer {tenant.keys['owner']}"})
    assert made.status_code == 201, made.text
    agent_id = str(made.json()["id"])
    changed = await client.patch(f"/v1/agents/{agent_id}", json={"instructions": "Hello."}, headers=tenant.headers())
    assert changed.status_code == 200, changed.text  # version 2, so a version diff exists
    return agent_id


async def _version(client: Any, tenant: ConsoleTenant) -> str:
    return "2"


async def _key(client: Any, tenant: ConsoleTenant) -> str:
    made = await client.post(
        "/v1/api-keys", json={"role": "viewer"}, headers={"Authorization": f"Bearer {tenant.keys['owner']}"}
    )
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def _member(client: Any, tenant: ConsoleTenant) -> str:
    made = await client.post(
        "/v1/members", json={"email": f"m{next(_emails)}@matrix.example", "role": "viewer"}, headers=tenant.headers()
    )
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def _invitation(client: Any, tenant: ConsoleTenant) -> str:
    """A pending invitation of a new viewer."""
    scope = TenantScope(tenant.id)
    async with client.app.state.database.unit_of_work(scope) as session:
        issued = await invite_member(
            session,
            scope=scope,
            actor=TEST_ACTOR,
            actor_role=Role.OWNER,
            email=f"i{next(_emails)}@matrix.example",
            role=Role.VIEWER,
        )
    return issued.invitation.id


async def _run(client: Any, tenant: ConsoleTenant) -> str:
    """A completed run of a new agent (executed in the test's event loop)."""
    body = {"agent_id": await _agent(client, tenant), "thread": {"messages": [{"role": "user", "content": "Hi"}]}}
    made = await client.post("/v1/runs", json=body, headers=tenant.headers())
    assert made.status_code == 201, made.text
    run = made.json()
    await wait_for_run(client, run["thread_id"], run["id"], tenant.headers(), statuses={"completed"})
    return str(run["id"])


async def _pending_run(client: Any, tenant: ConsoleTenant) -> str:
    """A run waiting for the approval of its call ``call_1`` (a scripted model executed in the test's event loop)."""
    run_inline(client, model_factory=scripted_model)
    tool = {"type": "function", "name": "lookup", "requires_approval": True}
    body = {"name": "approver", "model": "meta-llama/Llama-3.1-8B-Instruct", "instructions": "Hi.", "tools": [tool]}
    agent = await client.post("/v1/agents", json=body, headers=tenant.headers())
    assert agent.status_code == 201, agent.text
    body = {"agent_id": agent.json()["id"], "thread": {"messages": [{"role": "user", "content": "Look it up"}]}}
    made = await client.post("/v1/runs", json=body, headers=tenant.headers())
    assert made.status_code == 201, made.text
    run = made.json()
    await wait_for_run(client, run["thread_id"], run["id"], tenant.headers(), statuses={"requires_action"})
    return str(run["id"])


_workflows: dict[str, str] = {}


async def _workflow(client: Any, tenant: ConsoleTenant) -> str:
    """The tenant's workflow, which first asks a person, then an agent (one per tenant: the routes of its runs name
    both the workflow and the run)."""
    if tenant.id not in _workflows:
        nodes = [
            {"type": "user_approval", "id": "review", "message": "Go?", "approved": "ask", "rejected": "done"},
            {"type": "agent", "id": "ask", "agent_id": await _agent(client, tenant), "next": "done"},
            {"type": "end", "id": "done"},
        ]
        body = {"name": "matrix-flow", "start": "review", "nodes": nodes}
        made = await client.post("/v1/workflows", json=body, headers=tenant.headers())
        assert made.status_code == 201, made.text
        _workflows[tenant.id] = str(made.json()["id"])
    return _workflows[tenant.id]


async def _workflow_run(client: Any, tenant: ConsoleTenant) -> str:
    """A run of the tenant's workflow waiting at its approval node (call ``approve_review_0``)."""
    body = {"workflow_id": await _workflow(client, tenant), "thread": {"messages": [{"content": "Hi"}]}}
    made = await client.post("/v1/runs", json=body, headers=tenant.headers())
    assert made.status_code == 201, made.text
    run = made.json()
    await wait_for_run(client, run["thread_id"], run["id"], tenant.headers(), statuses={"requires_action"})
    return str(run["id"])


FACTORIES: dict[str, Callable[[Any, ConsoleTenant], Awaitable[str]]] = {
    "agent_id": _agent,
    "key_id": _key,
    "run_id": _run,
    "pending_run_id": _pending_run,
    "member_id": _member,
    "invitation_id": _invitation,
    "version": _version,
    **BILLING_FACTORIES,  # budget_id, invoice_id (rated usage of this month)
    "vector_store_id": VECTOR_STORE_FACTORIES["vector_store_id"],  # a store holding one file, ingested
    "file_id": VECTOR_STORE_FACTORIES["file_id"],  # that file
    "workflow_id": _workflow,
    "workflow_run_id": _workflow_run,  # a run of that workflow
}
FORMS: dict[str, dict[str, str]] = {  # what a browser submits on each form (the positive control)
    "POST /console/agents": {"name": "a", "model": "meta-llama/Llama-3.1-8B-Instruct", "instructions": ""},
    "POST /console/agents/{agent_id}": {"name": "b", "model": "meta-llama/Llama-3.1-8B-Instruct"},
    "POST /console/agents/check-schema": {"schema": '{{"type": "object"}}'},  # (braces doubled: .format)
    "POST /console/keys": {"name": "k", "role": "viewer"},
    "POST /console/members": {"email": "invited@matrix.example", "role": "viewer"},
    "POST /console/members/{member_id}/role": {"role": "developer"},
    "POST /console/playground": {"agent_id": "{agent}", "message": "Hello"},
    "POST /console/playground/{run_id}/messages": {"message": "And then?"},  # the agent of the run it follows
    "POST /console/playground/{pending_run_id}/required_action": {"decision": "approve", "tool_call_id": "call_1"},
    "POST /console/billing/budgets": {"limit": "25.00", "currency": "USD", "hard": "on"},
    "POST /console/password": {"current_password": PASSWORD, "new_password": "another long password"},
    "POST /console/knowledge": {"name": "docs"},
    "POST /console/knowledge/{vector_store_id}/search": {"query": "ferry", "max_num_results": "3"},
    "POST /console/knowledge/{vector_store_id}/attach": {"agent_id": "{agent}"},
    "POST /console/workflows": {"name": "w", "agent_id": "{agent}"},
    "POST /console/workflows/{workflow_id}": {"op": "add:nodes", "new_node_type": "end"},  # the form, a node added
    "POST /console/workflows/{workflow_id}/runs": {"message": "Hi"},
    "POST /console/workflows/{workflow_id}/runs/{workflow_run_id}/approval": {
        "decision": "approve",
        "tool_call_id": "approve_review_0",
    },
}
FILES: dict[str, list[tuple[str, tuple[str, bytes, str]]]] = {  # the files a multipart form sends besides FORMS
    "POST /console/knowledge/{vector_store_id}/files": [
        ("file", ("more.txt", b"The pier opens at six.", "text/plain"))
    ],
}


def test_every_console_route_declares_its_access_and_has_factories() -> None:
    assert len(GUARDED) >= 8
    undeclared = [str(r) for r in ROUTES if r.access not in _LEVELS]
    assert undeclared == [], "console routes must declare opt=console_access(...)"
    missing = [f"{r}: {p}" for r in GUARDED for p in r.path_params if p not in FACTORIES]
    assert missing == [], "add a factory for these path parameters to FACTORIES"
    public = sorted(str(r) for r in ROUTES if r.access == "public")
    assert public == [
        "GET /console/invitations/{secret}",
        "GET /console/password-reset",
        "GET /console/password-reset/{secret}",
        "GET /console/sign-in",
        "GET /console/static/{file_path}",
        "POST /console/invitations/{secret}",
        "POST /console/password-reset",
        "POST /console/password-reset/{secret}",
        "POST /console/sign-in",
    ]


async def test_an_unknown_invitation_link_answers_an_error_page_with_no_session(console: Any) -> None:
    """The public invitation routes (the link's secret is their only credential): nothing to find, nothing done."""
    console.cookies.clear()
    shown = await console.get("/console/invitations/no-such-secret")
    assert shown.status_code == 404
    assert "Invitation link not valid" in shown.text
    token = (await console.get("/console/sign-in")).cookies.get("switchyard_console_csrf")
    posted = await console.post(
        "/console/invitations/no-such-secret", data={"new_password": PASSWORD, "csrf_token": token}
    )
    assert posted.status_code == 404
    assert "switchyard_console" not in posted.cookies


async def _ids(client: Any, route: ConsoleRoute, tenant: ConsoleTenant) -> dict[str, str]:
    return {name: await FACTORIES[name](client, tenant) for name in route.path_params}


async def _call(client: Any, route: ConsoleRoute, ids: dict[str, str], *, csrf: str | None) -> Any:
    path = route.path.format(**ids)
    if route.method == "GET":
        return await client.get(path)
    fields = {name: value.format(**ids) for name, value in FORMS.get(str(route), {}).items()}
    form = {**fields, **({"csrf_token": csrf} if csrf else {})}
    return await client.request(route.method, path, data=form, files=FILES.get(str(route)))


async def _as(client: Any, tenant: ConsoleTenant, role: str) -> str:
    client.cookies.clear()
    assert (await sign_in(client, tenant.emails[role])).status_code == 303
    return await page_csrf(client)


@pytest.mark.parametrize("route", GUARDED, ids=str)
async def test_console_isolation(console: Any, make_console_tenant: Any, route: ConsoleRoute) -> None:
    run_inline(console)
    mine, theirs = await make_console_tenant(), await make_console_tenant()
    own_ids = await _ids(console, route, mine)
    if "{agent}" in str(FORMS.get(str(route))):  # a form naming one of the tenant's agents
        own_ids["agent"] = await _agent(console, mine)
    their_ids = await _ids(console, route, theirs)
    if "agent" in own_ids:  # another tenant's ids in the path, the caller's own agent in the form: still not found
        their_ids["agent"] = own_ids["agent"]

    console.cookies.clear()  # no session: the sign-in page, for pages and forms alike
    anonymous = await _call(console, route, own_ids, csrf=None)
    assert anonymous.status_code == 302, anonymous.text
    assert anonymous.headers["location"].startswith("/console/sign-in")

    if route.access != "signed_in":  # every role below the declared one: refused by the server
        needed = Role(route.access)
        for role in [r for r in Role if not r.includes(needed)]:
            csrf = await _as(console, mine, role.value)
            refused = await _call(console, route, own_ids, csrf=csrf)
            assert refused.status_code == 403, f"{role.value}: {refused.status_code}"

    csrf = await _as(console, mine, "owner")
    if route.path_params:  # another tenant's ids: not found, never shown or changed
        foreign = await _call(console, route, their_ids, csrf=csrf)
        assert foreign.status_code == 404, foreign.text
    own = await _call(console, route, own_ids, csrf=csrf)  # the positive control
    assert own.status_code in (200, 303), own.text


# The operator's pages (console.operator): without a session, and with a member's (even an owner's), every page and
# form answers a redirect to the operator sign-in and changes nothing; an operator's session opens them.
OPERATOR_FORMS: dict[str, dict[str, str]] = {
    "POST /console/operator/tenants/{tenant_id}/credits": {"amount": "1.00", "currency": "USD", "reason": "matrix"},
    "POST /console/operator/rate-cards": {"instance_type": "trn2.48xlarge", "price_per_chip_hour": "2.5"},
    "POST /console/operator/tenants": {"name": "Matrix Co"},
    "POST /console/operator/tenants/{tenant_id}/capacity": {"instance": "trn2.48xlarge", "tp": "8", "replicas": "1"},
}
OPERATOR_PUBLIC = ["GET /console/operator/sign-in", "POST /console/operator/sign-in"]


def test_every_operator_route_needs_an_operator_session_but_the_sign_in() -> None:
    assert len(OPERATOR_ROUTES) >= 8
    assert sorted(str(r) for r in OPERATOR_ROUTES if r.access != "operator") == OPERATOR_PUBLIC
    assert all(r.access == "public" for r in OPERATOR_ROUTES if str(r) in OPERATOR_PUBLIC)
    assert {p for r in OPERATOR_ROUTES for p in r.path_params} <= {"tenant_id", "member_id"}
    assert set(OPERATOR_FORMS) <= {str(r) for r in OPERATOR_ROUTES}


async def _operator_call(client: Any, route: ConsoleRoute, tenant: Any, *, csrf: str | None) -> Any:
    path = route.path.format(tenant_id=tenant.id, member_id=tenant.member_ids["owner"])
    if route.method == "GET":
        return await client.get(path)
    form = {**OPERATOR_FORMS.get(str(route), {}), **({"csrf_token": csrf} if csrf else {})}
    return await client.request(route.method, path, data=form)


async def _operator_actions(client: Any) -> list[str]:
    from sqlalchemy import select

    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import OperatorAuditEvent

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(OperatorAuditEvent.action))).scalars())


@pytest.mark.parametrize("route", [r for r in OPERATOR_ROUTES if r.access == "operator"], ids=str)
async def test_operator_pages_refuse_no_session_and_member_sessions(
    console: Any, make_console_tenant: Any, route: ConsoleRoute
) -> None:
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.identity.operator_accounts import create_operator_account
    from tests.platform.console.factories import TEST_ACTOR, csrf_of

    tenant = await make_console_tenant()
    before = await _operator_actions(console)
    console.cookies.clear()
    anonymous = await _operator_call(console, route, tenant, csrf=None)
    assert anonymous.status_code == 302, anonymous.text
    assert anonymous.headers["location"].startswith("/console/operator/sign-in")
    member_csrf = await _as(console, tenant, "owner")  # the tenant's owner: still no operator
    refused = await _operator_call(console, route, tenant, csrf=member_csrf)
    assert refused.status_code == 302, refused.text
    assert refused.headers["location"].startswith("/console/operator/sign-in")
    assert await _operator_actions(console) == before  # nothing was done

    email = f"ops{next(_emails)}@matrix.example"
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        await create_operator_account(session, actor=TEST_ACTOR, email=email, password=PASSWORD)
    form = await console.get("/console/operator/sign-in")
    signed_in = await console.post(
        "/console/operator/sign-in", data={"email": email, "password": PASSWORD, "csrf_token": csrf_of(form.text)}
    )
    assert signed_in.status_code == 303
    csrf = csrf_of((await console.get("/console/operator/")).text)
    own = await _operator_call(console, route, tenant, csrf=csrf)  # the positive control
    assert own.status_code in (200, 303), own.text
