"""The agent builder in a real browser, at desktop and phone widths: an admin adds a function tool whose JSON
Schema is checked as it is typed, an MCP server requiring approval with a write-only header, and a handoff, by
keyboard where a person would; saves; sees them named on the agent page; edits and reads what changed field by
field; and is asked before deleting. Without JavaScript the same form still builds an agent (rows are added by the
server)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.platform.console.browser.served import MODELS, Console, sign_in

pytestmark = pytest.mark.slow

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def _no_sideways_scroll(page: Any, where: str) -> None:
    widths = page.evaluate("({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")
    assert widths["scroll"] <= widths["inner"], f"{where} scrolls sideways: {widths}"


def _add_tool_by_keyboard(page: Any, label: str) -> None:
    """Choose the tool type in the select and press Enter on "Add tool": the server adds the row and the page
    lands on its first field."""
    page.get_by_label("Add a tool").select_option(label=label)
    page.get_by_role("button", name="Add tool").focus()
    page.keyboard.press("Enter")


def _status(page: Any, field_id: str) -> str:
    return str(page.locator(f"#{field_id}-status").inner_text())


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_an_admin_builds_an_agent_with_tools_and_a_handoff_edits_it_and_deletes_it(
    console: Console, page: Any, viewport: str
) -> None:
    name = f"refund-bot-{viewport}"
    page.set_viewport_size(VIEWPORTS[viewport])
    sign_in(page, console, "admin")
    page.get_by_role("link", name="Agents").click()
    page.get_by_role("link", name="New agent").click()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Model", exact=True).select_option(MODELS[0])
    page.get_by_label("Instructions").fill("# Refunds\n- be **kind**\n- quote the `order_id`")
    preview = page.locator("#instructions-preview-body")
    assert preview.locator("h4").inner_text() == "Refunds"  # Markdown read as such, as typed
    assert preview.locator("li strong").inner_text() == "kind"

    _add_tool_by_keyboard(page, "Function (your code runs it)")
    page.locator("#tools-0-name:focus").wait_for()  # landed on the new row's first field
    page.keyboard.type("lookup_order")
    page.get_by_label("Description").first.fill("Find an order by its id")
    parameters = page.locator("#tools-0-parameters")
    parameters.fill('{"type": "object", "properties": {')
    assert _status(page, "tools-0-parameters").startswith("Not JSON")  # the browser's own parse, at once
    parameters.fill('{"type": "string"}')
    page.locator("#tools-0-parameters-status.invalid", has_text="type 'object'").wait_for()  # the server's check
    parameters.fill(json.dumps(SCHEMA, indent=2))
    page.locator("#tools-0-parameters-status.valid", has_text="Valid JSON Schema").wait_for()

    _add_tool_by_keyboard(page, "MCP server")
    page.locator("#tools-1-server_label:focus").wait_for()
    page.keyboard.type("crm")
    page.locator("#tools-1-server_url").fill("https://crm.example/mcp")
    page.locator("#tools-1-headers").fill("Authorization: Bearer crm-secret-42")
    page.locator("#tools-1-requires_approval").check()
    assert page.locator("#tools-0-name").input_value() == "lookup_order"  # the rows typed before are kept

    page.get_by_role("button", name="Add handoff").click()
    support_bot = page.locator("#handoffs-0-agent_id option", has_text="support-bot").get_attribute("value")
    page.locator("#handoffs-0-agent_id").select_option(support_bot)
    page.locator("#handoffs-0-description").fill("questions that are not about refunds")
    if viewport == "phone":
        _no_sideways_scroll(page, "the agent form")
    page.screenshot(path=str(console.shots / f"agent-builder-{viewport}.png"), full_page=True)
    page.get_by_label("Name", exact=True).press("Enter")  # Enter in a field saves (not "Remove tool 1")

    page.get_by_role("heading", name=f"{name} v1").wait_for()
    tools = page.locator("#agent-tools tbody tr")
    assert tools.count() == 2
    assert re.search(r"function\s+lookup_order.*order_id.*runs without approval", tools.nth(0).inner_text(), re.S)
    assert re.search(r"mcp\s+crm.*crm\.example.*asks approval", tools.nth(1).inner_text(), re.S)
    assert "support-bot" in page.locator("#agent-handoffs").inner_text()
    assert "crm-secret-42" not in page.content()
    if viewport == "phone":
        _no_sideways_scroll(page, "the agent page")
    page.screenshot(path=str(console.shots / f"agent-tools-{viewport}.png"), full_page=True)
    agent_id = page.locator("dl.facts code").first.inner_text()
    with console.api() as api:
        agent = api.get(f"/v1/agents/{agent_id}").json()
    assert agent["tools"][0]["parameters"] == SCHEMA
    assert agent["tools"][1]["requires_approval"] is True
    assert agent["tools"][1]["headers"] == {"Authorization": "<redacted>"}

    page.get_by_role("link", name="Edit (makes version 2)").click()
    assert page.locator("#tools-1-headers").input_value() == "Authorization: <redacted>"
    page.locator("#tools-1-allowed_tools").fill("find_customer")
    page.get_by_label("Temperature").fill("0.3")
    page.get_by_role("button", name="Save as version 2").click()
    page.get_by_role("heading", name=f"{name} v2").wait_for()
    page.get_by_role("link", name="changes from v1").click()
    changes = page.get_by_role("table", name="Changes from version 1 to version 2")
    changes.wait_for()
    rows = changes.locator("tbody tr")
    fields = [rows.nth(i).locator("th").inner_text() for i in range(rows.count())]
    assert fields == ["model_params › temperature", "tool MCP server crm › allowed_tools"], fields
    assert "0.3" in rows.nth(0).locator("td.after").inner_text()
    assert "find_customer" in rows.nth(1).locator("td.after").inner_text()
    page.screenshot(path=str(console.shots / f"agent-diff-{viewport}.png"), full_page=True)
    with console.api() as api:  # the MCP header was kept though the form only ever showed <redacted>
        log = api.get("/v1/audit-log").json()["data"]
    update = next(e for e in log if e["action"] == "agent.update" and e["target_id"] == agent_id)
    assert update["details"]["fields"] == ["model_params", "tools"]

    page.get_by_role("link", name=f"Back to {name}").click()
    page.get_by_role("link", name=f"Delete {name}…").click()
    page.get_by_role("heading", name=f"Delete {name}?").wait_for()
    page.get_by_role("link", name="Cancel").click()  # asked, and nothing happened
    page.get_by_role("heading", name=f"{name} v2").wait_for()
    page.get_by_role("link", name=f"Delete {name}…").click()
    page.get_by_role("button", name=f"Delete {name}").click()
    page.get_by_role("heading", name="Agents").wait_for()
    assert page.get_by_role("link", name=name).count() == 0
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]  (no CSP violation, no script error)


def test_without_javascript_the_form_adds_rows_and_saves(console: Console, browser: Any) -> None:
    context = browser.new_context(java_script_enabled=False, viewport=VIEWPORTS["desktop"])
    try:
        page = context.new_page()
        page.goto(f"{console.url}/console/sign-in")
        page.get_by_label("Email").fill(console.emails["admin"])
        from tests.platform.console.factories import PASSWORD

        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"{console.url}/console/agents/new")
        assert page.locator("#instructions-preview").is_hidden()  # the preview needs the script
        page.get_by_label("Name", exact=True).fill("plain-form-bot")
        page.get_by_label("Add a tool").select_option(label="Calculator (built-in)")
        page.get_by_role("button", name="Add tool").click()
        page.locator("#tools-0-requires_approval").check()
        page.get_by_label("Add an output guardrail").select_option(label="Longest text")
        page.get_by_role("button", name="Add output guardrail").click()
        assert page.locator("#tools-0-requires_approval").is_checked()  # kept through the round trip
        page.locator("#guardrails-output-0-max_chars").fill("500")
        page.get_by_role("button", name="Create agent").click()
        page.get_by_role("heading", name="plain-form-bot v1").wait_for()
        assert "calculator" in page.locator("#agent-tools").inner_text()
        assert "asks approval" in page.locator("#agent-tools").inner_text()
        assert "trips past 500 characters" in page.locator("#agent-guardrails").inner_text()
    finally:
        context.close()


ANSWER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "status": {"type": "string"}},
    "required": ["order_id", "status"],
    "additionalProperties": False,
}


def test_an_agent_built_in_the_console_runs_in_the_playground_and_its_trace_reads_the_tool_call(
    console: Console, page: Any
) -> None:
    """Built entirely in the console (a function tool, an MCP server asking approval, a structured output and a
    handoff), run in the playground (the function's output given there), and its trace read: the tool's
    arguments and its result."""
    sign_in(page, console, "admin")
    page.get_by_role("link", name="Agents").click()
    page.get_by_role("link", name="New agent").click()
    page.get_by_label("Name", exact=True).fill("order-desk")
    page.get_by_label("Model", exact=True).select_option(MODELS[0])
    page.get_by_label("Instructions").fill("Answer about orders.")
    _add_tool_by_keyboard(page, "Function (your code runs it)")
    page.locator("#tools-0-name:focus").wait_for()
    page.keyboard.type("lookup_order")
    page.locator("#tools-0-parameters").fill(json.dumps(SCHEMA))
    _add_tool_by_keyboard(page, "MCP server")
    page.locator("#tools-1-server_label:focus").wait_for()
    page.keyboard.type("crm")
    page.locator("#tools-1-server_url").fill(console.mcp_url)
    page.locator("#tools-1-requires_approval").check()
    page.get_by_role("button", name="Add handoff").click()
    support_bot = page.locator("#handoffs-0-agent_id option", has_text="support-bot").get_attribute("value")
    page.locator("#handoffs-0-agent_id").select_option(support_bot)
    page.get_by_label("Answer schema").fill(json.dumps(ANSWER, indent=2))
    page.get_by_label("Format name").fill("order_status")
    page.get_by_label("Name", exact=True).press("Enter")
    page.get_by_role("heading", name="order-desk v1").wait_for()
    assert "JSON of the schema “order_status”" in page.locator("#agent-output").inner_text()

    page.get_by_role("link", name="Playground").click()
    page.get_by_label("Agent").select_option(label=f"order-desk (v1, {MODELS[0]})")
    page.get_by_label("Message").fill("Where is my parcel? Use lookup_order with order_id=A-7")
    page.get_by_role("button", name="Send").click()
    page.get_by_label(re.compile(r"Output of lookup_order")).fill('{"status": "shipped"}')
    page.get_by_role("button", name="Submit outputs").click()
    page.locator("#run-status", has_text="completed").wait_for(timeout=60_000)
    answer = json.loads(page.locator("#chat li.msg.assistant p.text").last.inner_text())
    assert set(answer) == {"order_id", "status"}  # the structured output

    page.locator("#result:not([data-stream])").wait_for()  # the stream ended and the final result was swapped in
    page.locator("#run-compute a").click()  # the run's trace
    page.wait_for_url(re.compile(r"/console/runs/run_\w+$"))
    trace = page.locator("main").inner_text()
    assert "lookup_order" in trace
    assert '"order_id": "A-7"' in trace  # the tool's arguments
    assert "shipped" in trace  # and the result the playground gave it
    page.screenshot(path=str(console.shots / "agent-trace.png"), full_page=True)
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]
