"""The workflow editor over HTTP: create from a name and an agent, edit through the list view's forms (nodes added by
the server, each save a new version through the API's service), a refused save shown on the node it concerns with
nothing saved, the versions, a run started from the editor with its approval decided, delete after asking, and the
roles and tenancy of every route."""

from __future__ import annotations

import asyncio
import re
from html.parser import HTMLParser
from typing import Any

from switchyard.platform.console.pages.workflow_canvas import draw
from tests.platform.agents_api.factories import make_agent, run_inline
from tests.platform.console.factories import ConsoleTenant, page_csrf, sign_in

_EDITOR = re.compile(r"^/console/workflows/(workflow_\w+)$")
_RUN_PAGE = re.compile(r"^/console/workflows/workflow_\w+/runs/(run_\w+)$")


class _FormFields(HTMLParser):
    """The fields a browser would send from the form with id ``form_id`` (buttons aside)."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id, self.inside, self.fields = form_id, False, {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside or ("name" not in a and tag != "option"):
            return
        if tag == "input" and a.get("type") not in ("submit", "button", "checkbox"):
            self.fields[a["name"]] = a.get("value", "")
        elif tag == "select":
            self._select = a["name"]
            self.fields.setdefault(a["name"], None)
        elif tag == "option" and self._select is not None:
            if self.fields[self._select] is None or "selected" in a:
                self.fields[self._select] = a.get("value", "")
        elif tag == "textarea":
            self._textarea = a["name"]
            self.fields[a["name"]] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.fields[self._textarea] += data.removeprefix("\n") if not self.fields[self._textarea] else data


def form_of(html: str, form_id: str = "workflow-form") -> dict[str, str]:
    parser = _FormFields(form_id)
    parser.feed(html)
    assert parser.fields, f"the page has no form {form_id!r}"
    return {k: v or "" for k, v in parser.fields.items()}


async def _signed_in(console: Any, tenant: ConsoleTenant, role: str) -> str:
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails[role])).status_code == 303
    return await page_csrf(console, "/console/")


async def _create(console: Any, csrf: str, agent_id: str, name: str = "triage") -> str:
    made = await console.post("/console/workflows", data={"csrf_token": csrf, "name": name, "agent_id": agent_id})
    assert made.status_code == 303, made.text
    found = _EDITOR.match(made.headers["location"])
    assert found, made.headers["location"]
    return found.group(1)


async def _api_workflow(console: Any, tenant: ConsoleTenant, workflow_id: str) -> dict[str, Any]:
    shown = await console.get(f"/v1/workflows/{workflow_id}", headers=tenant.headers())
    assert shown.status_code == 200, shown.text
    return dict(shown.json())


async def _add_node(console: Any, workflow_id: str, form: dict[str, str], kind: str) -> tuple[Any, dict[str, str]]:
    """Press "Add node" with ``kind`` chosen: the server answers the form again with the node added."""
    added = await console.post(
        f"/console/workflows/{workflow_id}", data={**form, "new_node_type": kind, "op": "add:nodes"}
    )
    assert added.status_code == 200, added.text
    return added, form_of(added.text)


async def _approval_desk(console: Any, csrf: str, agent_id: str) -> str:
    """A workflow built in the list view: refunds are approved by a person before the agent answers; anything
    else goes to the agent at once."""
    workflow_id = await _create(console, csrf, agent_id, "refund-desk")
    form = form_of((await console.get(f"/console/workflows/{workflow_id}")).text)
    _, form = await _add_node(console, workflow_id, form, "user_approval")
    _, form = await _add_node(console, workflow_id, form, "if_else")
    form |= {
        "nodes.2.id": "review",
        "nodes.2.message": "Refund for: {{ input }}?",
        "nodes.2.approved": "ask",
        "nodes.2.rejected": "done",
        "nodes.3.id": "route",
        "nodes.3.condition": "contains(lower(input), 'refund')",
        "nodes.3.then": "review",
        "nodes.3.else": "ask",
        "start": "route",
    }
    saved = await console.post(f"/console/workflows/{workflow_id}", data={**form, "op": "save"})
    assert saved.status_code == 303, saved.text
    return workflow_id


async def test_a_developer_creates_a_workflow_that_starts_with_an_agent_and_ends_with_its_answer(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant, name="support")
    csrf = await _signed_in(console, tenant, "developer")
    new = await console.get("/console/workflows/new")
    assert new.status_code == 200
    assert "support" in new.text
    refused = await console.post("/console/workflows", data={"csrf_token": csrf, "name": "", "agent_id": ""})
    assert refused.status_code == 400
    assert 'id="agent_id-error"' in refused.text
    assert 'id="name-error"' in refused.text

    workflow_id = await _create(console, csrf, agent["id"])
    workflow = await _api_workflow(console, tenant, workflow_id)
    assert workflow["start"] == "ask"
    assert [(n["type"], n["id"], n.get("next")) for n in workflow["nodes"]] == [
        ("agent", "ask", "done"),
        ("end", "done", None),
    ]
    assert workflow["nodes"][0]["agent_id"] == agent["id"]
    listed = await console.get("/console/workflows")
    assert f'href="/console/workflows/{workflow_id}"' in listed.text
    editor = await console.get(f"/console/workflows/{workflow_id}")
    assert editor.status_code == 200
    assert 'id="node-0"' in editor.text  # a section per node
    assert 'data-section="node-1"' in editor.text  # its box on the canvas leads there
    assert 'class="wf-edge"' in editor.text
    log = await console.get("/v1/audit-log", headers=tenant.headers())
    assert any(e["action"] == "workflow.create" and e["target_id"] == workflow_id for e in log.json()["data"])


async def test_the_list_view_adds_nodes_and_each_save_is_a_new_version(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant)
    csrf = await _signed_in(console, tenant, "developer")
    workflow_id = await _create(console, csrf, agent["id"])
    form = form_of((await console.get(f"/console/workflows/{workflow_id}")).text)
    assert form["nodes.0.agent_id"] == agent["id"]

    added, _ = await _add_node(console, workflow_id, form | {"nodes.0.input": "Kept: {{ input }}"}, "if_else")
    assert re.search(r'id="nodes-2-condition"[^>]*autofocus', added.text)  # the new node's first field
    assert "Kept: {{ input }}" in added.text  # what was typed before stays
    assert (await _api_workflow(console, tenant, workflow_id))["version"] == 1  # adding a node saves nothing

    workflow_id = await _approval_desk(console, csrf, agent["id"])
    workflow = await _api_workflow(console, tenant, workflow_id)
    assert workflow["version"] == 2
    assert workflow["start"] == "route"
    route = next(n for n in workflow["nodes"] if n["id"] == "route")
    assert (route["then"], route["else"]) == ("review", "ask")
    editor = await console.get(f"/console/workflows/{workflow_id}")
    assert re.search(r"v2 \(latest\).*v1", editor.text, re.S)  # the versions, newest first
    log = await console.get("/v1/audit-log", headers=tenant.headers())
    assert any(e["action"] == "workflow.update" and e["target_id"] == workflow_id for e in log.json()["data"])

    form = form_of(editor.text)
    removed = await console.post(f"/console/workflows/{workflow_id}", data={**form, "op": "remove:nodes.2"})
    assert removed.status_code == 200
    assert 'id="node-3"' not in removed.text
    unchanged = await console.post(f"/console/workflows/{workflow_id}", data={**form, "op": "save"})
    assert unchanged.status_code == 303
    assert (await _api_workflow(console, tenant, workflow_id))["version"] == 2  # nothing changed: no version


async def test_a_refused_save_shows_each_error_on_its_node_keeps_the_input_and_saves_nothing(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant)
    csrf = await _signed_in(console, tenant, "developer")
    workflow_id = await _create(console, csrf, agent["id"])
    form = form_of((await console.get(f"/console/workflows/{workflow_id}")).text)
    _, form = await _add_node(console, workflow_id, form, "if_else")

    # a connection left out: the spec's own field error, on that field of that node
    missing = await console.post(
        f"/console/workflows/{workflow_id}",
        data={**form, "nodes.2.condition": "len(input) > 3", "nodes.2.then": "ask", "op": "save"},
    )
    assert missing.status_code == 400, missing.text
    assert re.search(r'id="nodes-2-else"[^>]*aria-describedby="[^"]*nodes-2-else-error"', missing.text)
    assert 'id="nodes-2-else-error"' in missing.text
    assert 'value="len(input) &gt; 3"' in missing.text  # the form as sent

    # connected but not reachable from the start: the graph's check, on the node's section
    unreachable = await console.post(
        f"/console/workflows/{workflow_id}",
        data={**form, "nodes.2.condition": "len(input) > 3", "nodes.2.then": "ask", "nodes.2.else": "done"},
    )
    assert unreachable.status_code == 400
    assert re.search(r'<section[^>]*id="node-2"[^>]*aria-describedby="nodes-2-error"', unreachable.text)
    error = re.search(r'id="nodes-2-error">([^<]+)<', unreachable.text)
    assert error, unreachable.text
    assert "not reachable" in error.group(1)
    assert '<a href="#node-2">node if_else_1</a>' in unreachable.text  # the summary leads to the node

    # an expression that does not parse, on the condition
    broken = await console.post(
        f"/console/workflows/{workflow_id}",
        data={**form, "start": "if_else_1", "nodes.2.condition": "len(input >", "nodes.2.then": "ask",
              "nodes.2.else": "done"},
    )  # fmt: skip
    assert broken.status_code == 400
    assert re.search(r'id="nodes-2-condition"[^>]*aria-invalid="true"', broken.text)
    assert "does not parse" in broken.text

    # an agent of another tenant (or none): the service's 404, on the node's agent field
    other = await console.post(
        f"/console/workflows/{workflow_id}",
        data={**form_of(broken.text), "nodes.2.condition": "true", "nodes.0.agent_id": "agent_nobody"},
    )
    assert other.status_code == 400
    assert 'id="nodes-0-agent_id-error"' in other.text
    assert (await _api_workflow(console, tenant, workflow_id))["version"] == 1  # nothing was saved


async def test_a_viewer_reads_the_editor_but_cannot_change_run_or_delete_a_workflow(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant)
    csrf = await _signed_in(console, tenant, "developer")
    workflow_id = await _create(console, csrf, agent["id"])
    form = form_of((await console.get(f"/console/workflows/{workflow_id}")).text)

    csrf = await _signed_in(console, tenant, "viewer")
    editor = await console.get(f"/console/workflows/{workflow_id}")
    assert editor.status_code == 200
    assert re.search(r'<fieldset class="wf-all" disabled>', editor.text)
    assert "Run in playground" not in editor.text
    form["csrf_token"] = csrf
    for path, data in [
        (f"/console/workflows/{workflow_id}", {**form, "name": "renamed", "op": "save"}),
        ("/console/workflows", {"csrf_token": csrf, "name": "mine", "agent_id": agent["id"]}),
        (f"/console/workflows/{workflow_id}/runs", {"csrf_token": csrf, "message": "hi"}),
        (f"/console/workflows/{workflow_id}/delete", {"csrf_token": csrf}),
    ]:
        refused = await console.post(path, data=data)
        assert refused.status_code == 403, (path, refused.text)
    assert (await console.get("/console/workflows/new")).status_code == 403
    workflow = await _api_workflow(console, tenant, workflow_id)
    assert (workflow["name"], workflow["version"]) == ("triage", 1)


async def test_another_tenant_s_workflow_and_its_runs_are_not_found(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    owner, other = await make_console_tenant(), await make_console_tenant()
    agent = await make_agent(console, owner)
    csrf = await _signed_in(console, owner, "developer")
    workflow_id = await _create(console, csrf, agent["id"])
    started = await console.post(f"/console/workflows/{workflow_id}/runs", data={"csrf_token": csrf, "message": "hi"})
    run_path = started.headers["location"]
    form = form_of((await console.get(f"/console/workflows/{workflow_id}")).text)

    csrf = await _signed_in(console, other, "owner")
    for path in (f"/console/workflows/{workflow_id}", f"/console/workflows/{workflow_id}/delete", run_path):
        assert (await console.get(path)).status_code == 404, path
    for path, data in [
        (f"/console/workflows/{workflow_id}", {**form, "csrf_token": csrf, "name": "stolen"}),
        (f"/console/workflows/{workflow_id}/runs", {"csrf_token": csrf, "message": "hi"}),
        (f"/console/workflows/{workflow_id}/delete", {"csrf_token": csrf}),
    ]:
        assert (await console.post(path, data=data)).status_code == 404, path
    assert workflow_id not in (await console.get("/console/workflows")).text
    assert (await _api_workflow(console, owner, workflow_id))["name"] == "triage"


async def _progress(console: Any, run_path: str, *, until: str) -> str:
    """The run's progress fragment once its status reads ``until`` (the page polls the same fragment)."""
    for _ in range(500):
        shown = await console.get(f"{run_path}/progress")
        assert shown.status_code == 200, shown.text
        if f"<strong>{until}</strong>" in shown.text:
            return str(shown.text)
        await asyncio.sleep(0.01)
    raise AssertionError(f"the run never read {until}: {shown.text}")


async def test_a_run_started_from_the_editor_waits_at_its_approval_node_and_goes_on_when_approved(
    console: Any, make_console_tenant: Any
) -> None:
    run_inline(console)  # the app's simulated fleet answers the agent node
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant)
    csrf = await _signed_in(console, tenant, "developer")
    workflow_id = await _approval_desk(console, csrf, agent["id"])
    empty = await console.post(f"/console/workflows/{workflow_id}/runs", data={"csrf_token": csrf, "message": ""})
    assert empty.status_code == 400

    started = await console.post(
        f"/console/workflows/{workflow_id}/runs", data={"csrf_token": csrf, "message": "A refund, please"}
    )
    assert started.status_code == 303, started.text
    run_path = started.headers["location"]
    assert _RUN_PAGE.match(run_path), run_path
    page = await console.get(run_path)
    assert page.status_code == 200
    assert "Run of refund-desk" in page.text

    waiting = await _progress(console, run_path, until="requires action")
    assert "Refund for: A refund, please?" in waiting
    assert re.search(r'<g class="wf-box active" [^>]*data-node-id="review"', waiting)  # highlighted on the canvas
    assert re.search(r"route</strong>.*→ then", waiting, re.S)  # the if_else went its true way
    assert "hx-trigger" not in waiting  # no polling while it waits for a person
    call_id = re.search(r'name="tool_call_id" value="([^"]+)"', waiting)
    assert call_id

    odd = await console.post(
        f"{run_path}/approval", data={"csrf_token": csrf, "tool_call_id": call_id.group(1), "decision": "maybe"}
    )
    assert odd.status_code == 400
    decided = await console.post(
        f"{run_path}/approval", data={"csrf_token": csrf, "tool_call_id": call_id.group(1), "decision": "approve"}
    )
    assert decided.status_code == 303
    done = await _progress(console, run_path, until="completed")
    assert re.search(r"review</strong>.*→ approved", done, re.S)
    assert 'class="msg assistant"' in done  # the agent's answer
    log = await console.get("/v1/audit-log", headers=tenant.headers())
    assert any(e["action"] == "run.approvals" for e in log.json()["data"])


async def test_delete_asks_first_then_hides_the_workflow(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant)
    csrf = await _signed_in(console, tenant, "developer")
    workflow_id = await _create(console, csrf, agent["id"])
    asked = await console.get(f"/console/workflows/{workflow_id}/delete")
    assert asked.status_code == 200
    assert "Delete triage?" in asked.text
    assert (await _api_workflow(console, tenant, workflow_id))["name"] == "triage"  # asking deleted nothing
    deleted = await console.post(f"/console/workflows/{workflow_id}/delete", data={"csrf_token": csrf})
    assert deleted.status_code == 303
    assert deleted.headers["location"] == "/console/workflows"
    assert (await console.get(f"/v1/workflows/{workflow_id}", headers=tenant.headers())).status_code == 404
    assert workflow_id not in (await console.get("/console/workflows")).text


def test_the_canvas_lays_nodes_out_by_depth_with_branch_labels_and_marks_the_run() -> None:
    nodes = [
        {"type": "if_else", "id": "route", "name": "", "then": "review", "else": "ask"},
        {"type": "agent", "id": "ask", "name": "Ask the agent", "next": "done"},
        {"type": "user_approval", "id": "review", "name": "", "approved": "ask", "rejected": "done"},
        {"type": "end", "id": "done", "name": ""},
        {"type": "end", "id": "stray", "name": ""},  # reached from nowhere: a row of its own, below
    ]
    canvas = draw(nodes, "route", active="review", passed=frozenset({"route"}))
    rows = {b.node_id: b.y for b in canvas.boxes}
    assert rows["route"] < rows["ask"] == rows["review"] < rows["done"] < rows["stray"]
    assert {a.label for a in canvas.arrows} == {"then", "else", "approved", "rejected", ""}
    assert len(canvas.arrows) == 5  # one a connection
    marks = {b.node_id: b.state for b in canvas.boxes}
    assert (marks["review"], marks["route"], marks["ask"]) == ("active", "passed", "")
    assert [b.title for b in canvas.boxes if b.start] == ["route"]
    assert max(b.x + canvas.box_width for b in canvas.boxes) <= canvas.width
    assert max(b.y + canvas.box_height for b in canvas.boxes) <= canvas.height
