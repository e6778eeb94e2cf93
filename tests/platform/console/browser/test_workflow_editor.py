"""The workflow editor in a real browser. At desktop width an admin builds a workflow with an if_else branch and a
user_approval with the keyboard alone (Tab, Enter, arrow keys and typing; no clicks), runs it from the editor,
watches it stop at the approval node highlighted on the canvas, and approves it. At phone width the editor and a
run's page do not scroll sideways (the canvas scrolls inside its box), and a refused save shows its error on the
node's field."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.platform.console.browser.served import Console, sign_in

pytestmark = pytest.mark.slow

MOST_TABS = 400  # more stops than any page here has: a field never reached fails the test


def _focused(page: Any, selector: str) -> bool:
    return bool(page.evaluate("(s) => !!document.activeElement && document.activeElement.matches(s)", selector))


def _tab_to(page: Any, selector: str, *, backwards: bool = False) -> None:
    """Press Tab (Shift+Tab) until the element ``selector`` names has focus: it must be reachable by keyboard."""
    for _ in range(MOST_TABS):
        if _focused(page, selector):
            return
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
    raise AssertionError(f"{selector} is never reached with the keyboard")


def _choose(page: Any, text: str) -> None:
    """In the focused select, press the arrow keys until the chosen option reads ``text`` (at its start)."""
    for key in ("Home", *["ArrowDown"] * 30):
        page.keyboard.press(key)
        chosen = page.evaluate("() => document.activeElement.selectedOptions[0].textContent.trim()")
        if chosen.startswith(text):
            return
    raise AssertionError(f"no option {text!r} in the focused select")


def _press(page: Any, selector: str, *, backwards: bool = False) -> None:
    _tab_to(page, selector, backwards=backwards)
    page.keyboard.press("Enter")


def _no_sideways_scroll(page: Any, where: str) -> None:
    widths = page.evaluate("({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")
    assert widths["scroll"] <= widths["inner"], f"{where} scrolls sideways: {widths}"


def _add_node(page: Any, label: str) -> None:
    _tab_to(page, "#new_node_type")
    _choose(page, label)
    _press(page, "#add-nodes")


def test_an_admin_builds_runs_and_approves_a_workflow_with_the_keyboard_alone(console: Console, page: Any) -> None:
    sign_in(page, console, "admin")
    _press(page, 'nav a[href="/console/workflows"]')
    page.get_by_role("heading", name="Workflows").wait_for()
    _press(page, 'a[href="/console/workflows/new"]')
    page.locator("#name:focus").wait_for()  # the name field has focus
    page.keyboard.type("refund-desk")
    _tab_to(page, "#agent_id")
    _choose(page, "support-bot")
    _press(page, "#workflow-new button[type=submit]")
    page.get_by_role("heading", name="refund-desk v1").wait_for()

    _add_node(page, "User approval")
    page.locator("#nodes-2-message:focus").wait_for()  # the new node's first field
    page.keyboard.type("Refund for: {{ input }}?")
    _tab_to(page, "#nodes-2-approved")
    _choose(page, "ask")
    _tab_to(page, "#nodes-2-rejected")
    _choose(page, "done")

    _add_node(page, "If / else")
    page.locator("#nodes-3-condition:focus").wait_for()
    page.keyboard.type("contains(lower(input), 'refund')")
    _tab_to(page, "#nodes-3-then")
    _choose(page, "user_approval_1")
    _tab_to(page, "#nodes-3-else")
    _choose(page, "ask")
    _tab_to(page, "#start", backwards=True)
    _choose(page, "if_else_1")
    assert page.locator("#nodes-2-message").input_value() == "Refund for: {{ input }}?"  # kept across the adds
    _press(page, "#save")
    page.locator("#saved").wait_for()
    page.get_by_role("heading", name="refund-desk v2").wait_for()

    route = page.locator(".wf-box[data-node-id='if_else_1']")  # the canvas: labelled boxes, arrows, branches
    assert "start" in str(route.get_attribute("class")).split()
    assert set(page.locator(".wf-edge-label").all_text_contents()) >= {"then", "else", "approved", "rejected"}
    _tab_to(page, "#box-3")  # the if_else's box: Enter goes to its section of the list
    page.keyboard.press("Enter")
    assert _focused(page, "#node-3")
    page.screenshot(path=str(console.shots / "workflow-editor-desktop.png"), full_page=True)

    _tab_to(page, "#run-message")
    page.keyboard.type("I want a refund for order 42")
    _press(page, "#wf-run-form button[type=submit]")
    page.get_by_role("heading", name="Waiting for your approval").wait_for()  # polled in as the run got there
    assert page.locator("#wf-approval-message").inner_text() == "Refund for: I want a refund for order 42?"
    assert page.locator(".wf-box.active").get_attribute("data-node-id") == "user_approval_1"
    assert re.search(r"→ then", page.locator("#wf-trail").inner_text())
    page.screenshot(path=str(console.shots / "workflow-run-approval-desktop.png"), full_page=True)
    _press(page, "#wf-approval button[value=approve]")
    page.locator("#run-status", has_text="completed").wait_for()
    assert "→ approved" in page.locator("#wf-trail").inner_text()
    assert page.locator("#wf-messages .msg.assistant").count() == 1  # the agent's answer
    assert page.locator(".wf-box.active").count() == 0
    page.screenshot(path=str(console.shots / "workflow-run-done-desktop.png"), full_page=True)
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]  (no CSP violation, no script error)


def test_at_phone_width_the_editor_a_refused_save_and_a_run_do_not_scroll_sideways(console: Console, page: Any) -> None:
    with console.api() as api:
        agent_id = next(a["id"] for a in api.get("/v1/agents").json()["data"] if a["name"] == "support-bot")
        nodes = [
            {"type": "if_else", "id": "route", "condition": "len(input) > 200", "then": "long", "else": "short"},
            {"type": "agent", "id": "long", "name": "Summarise a long request", "agent_id": agent_id, "next": "ok"},
            {"type": "agent", "id": "short", "name": "Answer a short one", "agent_id": agent_id, "next": "ok"},
            {"type": "user_approval", "id": "ok", "message": "Send it?", "approved": "done", "rejected": "done"},
            {"type": "end", "id": "done"},
        ]
        made = api.post("/v1/workflows", json={"name": "wide-desk", "start": "route", "nodes": nodes})
        assert made.status_code == 201, made.text
    workflow_id = made.json()["id"]
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, console, "admin")
    page.goto(f"{console.url}/console/workflows/{workflow_id}")
    page.get_by_role("heading", name="wide-desk v1").wait_for()
    _no_sideways_scroll(page, "the editor")
    box = page.evaluate(
        "() => { const b = document.querySelector('.canvas-box'); return [b.scrollWidth, b.clientWidth]; }"
    )
    assert box[0] > box[1]  # the canvas is wider than the phone: it scrolls inside its box

    # (refused before any screenshot: after one, Chromium reports the 4xx swap's style as a CSP violation)
    page.locator("#nodes-0-condition").fill("len(input >")
    page.get_by_role("button", name="Save as version 2").click()
    error = page.locator("#nodes-0-condition-error")  # on the node's field, which it describes
    error.wait_for()
    assert "does not parse" in error.inner_text()
    assert "nodes-0-condition-error" in str(page.locator("#nodes-0-condition").get_attribute("aria-describedby"))
    assert page.locator("#nodes-0-condition").input_value() == "len(input >"  # the input as typed
    _no_sideways_scroll(page, "the refused form")
    page.screenshot(path=str(console.shots / "workflow-error-phone.png"), full_page=True)

    page.get_by_label("Message", exact=True).fill("Hello there")
    page.get_by_role("button", name="Run version 1").click()
    page.get_by_role("heading", name="Waiting for your approval").wait_for()
    _no_sideways_scroll(page, "the run")
    page.screenshot(path=str(console.shots / "workflow-run-phone.png"), full_page=True)
    page.get_by_role("button", name="Reject").click()
    page.locator("#run-status", has_text="completed").wait_for()
    assert "→ rejected" in page.locator("#wf-trail").inner_text()
    page.get_by_role("link", name="Back to the editor").click()
    page.get_by_role("heading", name="wide-desk v1").wait_for()  # the refused save changed nothing
    page.screenshot(path=str(console.shots / "workflow-editor-phone.png"), full_page=True)
    refused = "Failed to load resource: the server responded with a status of 400 (Bad Request)"  # the refused save
    assert [e for e in page.errors if e != refused] == [], page.errors  # type: ignore[attr-defined]
