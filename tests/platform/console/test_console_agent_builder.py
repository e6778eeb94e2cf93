"""The console's agent builder over HTTP: every field of a version from a form, saved through the API's service;
rows added and removed by the server (no script needed); errors beside the field they name; an edit that audits
only what changed; a readable diff; delete after a confirmation page."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.platform.console.factories import page_csrf, sign_in

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
SECRET = "Bearer sk-live-0123456789"


def _form(csrf: str, **extra: str) -> dict[str, str]:
    return {"csrf_token": csrf, "name": "support", "model": MODEL, "instructions": "Help.", **extra}


async def _helper(console: Any, tenant: Any) -> str:
    made = await console.post(
        "/v1/agents", json={"name": "billing-desk", "model": MODEL, "instructions": "Bills."}, headers=tenant.headers()
    )
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _full_form(csrf: str, helper: str) -> dict[str, str]:
    return _form(
        csrf,
        **{
            "model_params.max_tokens": "300",
            "model_params.temperature": "0.2",
            "model_params.stop": "END\nSTOP",
            "limits.max_steps": "7",
            "limits.timeout_s": "120",
            "metadata": "team: support",
            "tools.0.type": "function",
            "tools.0.name": "lookup_order",
            "tools.0.description": "Find an order",
            "tools.0.parameters": json.dumps(SCHEMA),
            "tools.1.type": "mcp",
            "tools.1.server_label": "crm",
            "tools.1.server_url": "https://crm.example/mcp",
            "tools.1.allowed_tools": "find_customer, list_tickets",
            "tools.1.headers": f"Authorization: {SECRET}",
            "tools.1.requires_approval": "on",
            "tools.2.type": "calculator",
            "handoffs.0.agent_id": helper,
            "handoffs.0.description": "billing questions",
            "guardrails.input.0.type": "regex",
            "guardrails.input.0.name": "no_cards",
            "guardrails.input.0.pattern": r"\d{16}",
            "guardrails.output.0.type": "max_length",
            "guardrails.output.0.max_chars": "2000",
            "output_schema.schema": json.dumps(SCHEMA),
            "output_schema.name": "order",
        },
    )


async def test_a_developer_builds_every_field_of_an_agent_in_one_form(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    helper = await _helper(console, tenant)
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/agents/new")
    made = await console.post("/console/agents", data=_full_form(csrf, helper))
    assert made.status_code == 303, made.text
    agent_id = made.headers["location"].rsplit("/", 1)[1]

    agent = (await console.get(f"/v1/agents/{agent_id}", headers=tenant.headers())).json()
    assert agent["model_params"]["max_tokens"] == 300
    assert agent["model_params"]["temperature"] == 0.2
    assert agent["model_params"]["stop"] == ["END", "STOP"]
    assert (agent["limits"]["max_steps"], agent["limits"]["timeout_s"]) == (7, 120.0)
    assert agent["metadata"] == {"team": "support"}
    function, mcp, calculator = agent["tools"]
    assert (function["name"], function["parameters"]) == ("lookup_order", SCHEMA)
    assert mcp["requires_approval"] is True
    assert mcp["allowed_tools"] == ["find_customer", "list_tickets"]
    assert mcp["headers"] == {"Authorization": "<redacted>"}
    assert calculator["type"] == "calculator"
    assert agent["handoffs"] == [{"agent_id": helper, "version": None, "description": "billing questions"}]
    assert agent["guardrails"]["input"][0]["pattern"] == r"\d{16}"
    assert agent["guardrails"]["output"][0]["max_chars"] == 2000
    assert agent["output_schema"] == {"name": "order", "schema": SCHEMA, "strict": True}

    page = await console.get(f"/console/agents/{agent_id}")
    assert page.status_code == 200
    tools = re.search(r'<table id="agent-tools".*?</table>', page.text, re.S)
    assert tools is not None
    assert "lookup_order" in tools.group(0)
    assert "arguments: order_id" in tools.group(0)
    row = re.search(r"<tr><td data-label=\"Type\">mcp</td>.*?</tr>", tools.group(0), re.S)
    assert row is not None
    assert "crm" in row.group(0)
    assert "asks approval" in row.group(0)
    assert "billing-desk" in page.text  # the handoff names its agent
    assert "no_cards: trips on a match" in page.text
    assert "JSON of the schema “order”" in page.text
    assert SECRET not in page.text
    edit = await console.get(f"/console/agents/{agent_id}/edit")
    assert "Authorization: &lt;redacted&gt;" in edit.text  # write-only: shown redacted, kept when sent back
    assert SECRET not in edit.text


async def test_adding_and_removing_rows_shows_the_form_again_and_saves_nothing(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/agents/new")
    added = await console.post("/console/agents", data=_form(csrf, op="add:tools", new_tool_type="mcp"))
    assert added.status_code == 200
    assert 'name="tools.0.type" value="mcp"' in added.text
    assert re.search(r'id="tools-0-server_label"[^>]* autofocus', added.text)  # lands on the new row
    assert 'value="Help."' not in added.text
    assert ">Help.</textarea>" in added.text
    both = await console.post(
        "/console/agents",
        data=_form(csrf, **{"tools.0.type": "calculator", "op": "add:handoffs"}),
    )
    assert 'name="tools.0.type" value="calculator"' in both.text
    assert 'id="handoffs-0"' in both.text
    removed = await console.post(
        "/console/agents",
        data=_form(csrf, **{"tools.0.type": "calculator", "tools.1.type": "current_time", "op": "remove:tools.0"}),
    )
    assert 'name="tools.0.type" value="current_time"' in removed.text
    assert 'value="calculator"' not in removed.text.split('id="new_tool_type"')[0]
    assert (await console.get("/v1/agents", headers=tenant.headers())).json()["data"] == []


async def test_errors_are_shown_beside_the_field_they_name(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/agents/new")
    cases = {  # the form's own reading, the spec's validation (pydantic loc), the service's (ApiError param)
        "tools-0-parameters": {"tools.0.type": "function", "tools.0.name": "f", "tools.0.parameters": "{oops"},
        "tools-0-parameters ": {"tools.0.type": "function", "tools.0.name": "f", "tools.0.parameters": '{"type": 1}'},
        "tools-0-name": {"tools.0.type": "function", "tools.0.name": "has space"},
        "model_params-max_tokens": {"model_params.max_tokens": "²"},
        "model_params-temperature": {"model_params.temperature": "7"},
        "handoffs-0": {"handoffs.0.agent_id": "agent_doesnotexist"},
        "guardrails-input-0-pattern": {"guardrails.input.0.type": "regex", "guardrails.input.0.pattern": "(("},
        "model": {"model": "no-such/model"},
        "output_schema-schema": {"output_schema.schema": '{"type": "array"}'},
        "output_schema-name": {"output_schema.schema": json.dumps(SCHEMA), "output_schema.name": "an answer"},
    }
    for field, extra in cases.items():
        refused = await console.post("/console/agents", data={**_form(csrf), **extra})
        assert refused.status_code == 400, (field, refused.text[:500])
        assert f'id="{field.strip()}-error"' in refused.text, (field, re.findall(r'id="([^"]+-error)"', refused.text))
        assert 'role="alert"' in refused.text
    assert (await console.get("/v1/agents", headers=tenant.headers())).json()["data"] == []


async def test_an_edit_keeps_redacted_headers_and_audits_only_the_fields_it_changed(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    helper = await _helper(console, tenant)
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/agents/new")
    made = await console.post("/console/agents", data=_full_form(csrf, helper))
    agent_id = made.headers["location"].rsplit("/", 1)[1]

    same = {**_full_form(csrf, helper), "tools.1.headers": "Authorization: <redacted>"}
    unchanged = await console.post(f"/console/agents/{agent_id}", data=same)
    assert unchanged.status_code == 303
    assert (await console.get(f"/v1/agents/{agent_id}", headers=tenant.headers())).json()["version"] == 1

    edited = await console.post(f"/console/agents/{agent_id}", data={**same, "instructions": "Help kindly."})
    assert edited.status_code == 303, edited.text
    agent = (await console.get(f"/v1/agents/{agent_id}", headers=tenant.headers())).json()
    assert (agent["version"], agent["instructions"]) == (2, "Help kindly.")
    assert agent["tools"][1]["headers"] == {"Authorization": "<redacted>"}
    log = (await console.get("/v1/audit-log", headers=tenant.headers())).json()["data"]
    update = next(e for e in log if e["action"] == "agent.update" and e["target_id"] == agent_id)
    assert update["details"]["fields"] == ["instructions"]

    diff = await console.get(f"/console/agents/{agent_id}/versions/2/diff")
    assert diff.status_code == 200
    rows = re.findall(r'<th scope="row">([^<]+)</th>', diff.text)
    assert rows == ["instructions"]
    assert "<code>Help.</code>" in diff.text
    assert "<code>Help kindly.</code>" in diff.text
    assert SECRET not in diff.text

    text_answers = {**same, "instructions": "Help kindly.", "output_schema.schema": "", "output_schema.name": ""}
    assert (await console.post(f"/console/agents/{agent_id}", data=text_answers)).status_code == 303
    agent = (await console.get(f"/v1/agents/{agent_id}", headers=tenant.headers())).json()
    assert (agent["version"], agent["output_schema"]) == (3, None)


async def test_the_diff_names_tools_added_and_settings_changed(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/agents/new")
    made = await console.post("/console/agents", data=_form(csrf))
    agent_id = made.headers["location"].rsplit("/", 1)[1]
    extra = {"tools.0.type": "calculator", "tools.0.requires_approval": "on", "limits.max_steps": "9"}
    assert (await console.post(f"/console/agents/{agent_id}", data=_form(csrf, **extra))).status_code == 303
    diff = await console.get(f"/console/agents/{agent_id}/versions/2/diff")
    rows = re.findall(r'<th scope="row">([^<]+)</th>', diff.text)
    assert "limits › max_steps" in rows
    assert "tool calculator › requires_approval" in rows
    assert "{" not in "".join(rows)  # fields, not JSON


async def test_delete_asks_first_on_a_page_of_its_own(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/agents/new")
    agent_id = (await console.post("/console/agents", data=_form(csrf))).headers["location"].rsplit("/", 1)[1]
    page = await console.get(f"/console/agents/{agent_id}")
    assert f'action="/console/agents/{agent_id}/delete"' not in page.text  # no one-click delete
    assert f'href="/console/agents/{agent_id}/delete"' in page.text
    confirm = await console.get(f"/console/agents/{agent_id}/delete")
    assert confirm.status_code == 200
    assert "Delete support?" in confirm.text
    assert f'action="/console/agents/{agent_id}/delete"' in confirm.text
    assert (await console.get(f"/v1/agents/{agent_id}", headers=tenant.headers())).status_code == 200
    done = await console.post(f"/console/agents/{agent_id}/delete", data={"csrf_token": csrf})
    assert done.status_code == 303
    assert (await console.get(f"/v1/agents/{agent_id}", headers=tenant.headers())).status_code == 404


async def test_the_schema_check_answers_what_the_spec_says(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/agents/new")
    headers = {"X-CSRF-Token": csrf}
    good = await console.post("/console/agents/check-schema", data={"schema": json.dumps(SCHEMA)}, headers=headers)
    assert good.json() == {"valid": True, "message": ""}
    for text, says in (("{", "not JSON"), ('{"type": "string"}', "type 'object'"), ('{"type": 5}', "JSON Schema")):
        bad = await console.post("/console/agents/check-schema", data={"schema": text}, headers=headers)
        assert bad.json()["valid"] is False, text
        assert says in bad.json()["message"], (text, bad.json())
    guard = await console.post(
        "/console/agents/check-schema", data={"schema": '{"type": "string"}', "kind": "schema"}, headers=headers
    )
    assert guard.json()["valid"] is True  # a guardrail's schema may be of any type
