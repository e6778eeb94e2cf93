"""Every console page's layout in a real browser, on a desktop (1280×800) and a phone (390×844): the page never
scrolls sideways (a wide table scrolls inside its own ``.scroll`` box), every form control has an accessible name
(as Chromium's accessibility tree computes it), and the main navigation is reached and followed with the keyboard
alone."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from switchyard.platform.db import UNSCOPED, Database
from tests.platform.console.browser.served import Console, sign_in

pytestmark = pytest.mark.slow

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
# Roles of the controls a person fills in or presses; each needs a name a screen reader can say.
CONTROL_ROLES = {"textbox", "searchbox", "combobox", "listbox", "checkbox", "radio", "spinbutton", "slider", "button"}
MAX_TABS_TO_NAV = 8  # the skip link, the brand, then the navigation


async def _rate_everything(database_url: str) -> None:
    """What the billing job does, so this month's usage has an invoice to open."""
    from switchyard.platform.billing.ledger import rate_events

    database = Database(database_url)
    try:
        while True:
            async with database.unit_of_work(UNSCOPED) as session:
                if not (await rate_events(session)).rated:
                    return
    finally:
        await database.dispose()


def _first_link(page: Any, console: Console, path: str, pattern: str) -> str:
    """The first link on ``path`` whose href matches ``pattern``: a page of one of the tenant's things."""
    page.goto(f"{console.url}{path}")
    hrefs = page.eval_on_selector_all("main a[href]", "links => links.map(a => a.getAttribute('href'))")
    found = [href for href in hrefs if re.fullmatch(pattern, href)]
    assert found, f"no link like {pattern} on {path}: {hrefs}"
    return str(found[0])


def _built_agent_pages(console: Console) -> dict[str, str]:
    """The builder's pages of an agent with a tool of most types, a handoff and guardrails, in its version 2."""
    with console.api() as api:
        support = next(a for a in api.get("/v1/agents").json()["data"] if a["name"] == "support-bot")
        schema = {"type": "object", "properties": {"order_id": {"type": "string"}}}
        tools = [
            {"type": "function", "name": "lookup_order", "parameters": schema, "requires_approval": True},
            {"type": "mcp", "server_label": "crm", "server_url": "https://crm.example/mcp", "headers": {"A": "b"}},
            {"type": "http_request", "allowed_hosts": ["api.example.com"]},
            {"type": "agent", "agent_id": support["id"], "name": "ask_support"},
            {"type": "calculator"},
        ]
        body = {
            "name": "layout-bot",
            "model": support["model"],
            "instructions": "# Orders\n- look them up",
            "tools": tools,
            "handoffs": [{"agent_id": support["id"], "description": "anything else"}],
            "guardrails": {
                "input": [{"type": "regex", "pattern": "x"}],
                "output": [{"type": "max_length", "max_chars": 9}],
            },
        }
        made = api.post("/v1/agents", json=body)
        assert made.status_code == 201, made.text
        agent_id = made.json()["id"]
        assert api.patch(f"/v1/agents/{agent_id}", json={"limits": {"max_steps": 5}}).status_code == 200
    return {
        "built agent": f"/console/agents/{agent_id}",
        "edit agent": f"/console/agents/{agent_id}/edit",
        "agent changes": f"/console/agents/{agent_id}/versions/2/diff",
        "delete agent": f"/console/agents/{agent_id}/delete",
    }


@pytest.fixture(scope="module")
def pages(console: Console, browser: Any) -> dict[str, str]:
    """Every console page a signed-in owner sees, by name."""
    with ThreadPoolExecutor(1) as pool:  # off this thread: Playwright's loop runs here
        pool.submit(asyncio.run, _rate_everything(console.app.state.settings.database_url)).result()
    context = browser.new_context()
    try:
        page = context.new_page()
        sign_in(page, console, "owner")
        return {
            "overview": "/console/",
            "agents": "/console/agents",
            "agent": _first_link(page, console, "/console/agents", r"/console/agents/(?!new$)[^/?]+"),
            "new agent": "/console/agents/new",
            **_built_agent_pages(console),
            "playground": "/console/playground",
            "runs": "/console/runs",
            "run trace": _first_link(page, console, "/console/runs", r"/console/runs/[^/?]+"),
            "keys": "/console/keys",
            "members": "/console/members",
            "billing": "/console/billing",
            "invoice": _first_link(page, console, "/console/billing", r"/console/billing/invoices/[^/]+"),
            "password": "/console/password",
            "audit log": "/console/audit",
        }
    finally:
        context.close()


@pytest.fixture(scope="module")
def owner_context(console: Console, browser: Any) -> Any:
    """One signed-in owner for every layout check (a session per test would be twelve sign-ins per viewport)."""
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, console, "owner")
    page.close()
    yield context
    context.close()


def _unnamed_controls(page: Any) -> list[str]:
    """Controls in Chromium's accessibility tree with no accessible name, as HTML."""
    cdp = page.context.new_cdp_session(page)
    try:
        nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
        unnamed = []
        for node in nodes:
            role = node.get("role", {}).get("value")
            if node.get("ignored") or role not in CONTROL_ROLES:
                continue
            if str(node.get("name", {}).get("value", "")).strip():
                continue
            html = cdp.send("DOM.getOuterHTML", {"backendNodeId": node["backendDOMNodeId"]})["outerHTML"]
            unnamed.append(f"{role}: {html[:200]}")
        return unnamed
    finally:
        cdp.detach()


def _overflow(page: Any) -> dict[str, Any]:
    return dict(
        page.evaluate(
            """() => {
                const root = document.scrollingElement;
                const wide = [...document.querySelectorAll('body *')]
                    .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.scroll'))
                    .slice(0, 5)
                    .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + e.className);
                return {scrollWidth: root.scrollWidth, innerWidth: window.innerWidth, wide};
            }"""
        )
    )


def _follow_the_navigation_by_keyboard(page: Any, console: Console, path: str) -> None:
    """Tab from the top of the page to the main navigation, then along it to a link to another page; Enter."""
    page.evaluate("document.activeElement && document.activeElement.blur()")  # focus at the top of the page
    focused_nav = None
    for _ in range(MAX_TABS_TO_NAV + 8):
        page.keyboard.press("Tab")
        focused_nav = page.evaluate(
            "(() => { const a = document.activeElement;"
            " return a && a.closest('nav[aria-label=Console]') ? a.getAttribute('href') : null; })()"
        )
        if focused_nav and focused_nav.rstrip("/") != path.rstrip("/"):
            break
    assert focused_nav, f"{path}: Tab never reached the navigation"
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(re.escape(console.url + focused_nav.rstrip("/")) + "/?$"))
    page.locator("nav[aria-label=Console] a[aria-current=page]").wait_for()
    assert page.locator("nav[aria-label=Console] a[aria-current=page]").get_attribute("href") == focused_nav


PAGE_NAMES = [
    "overview",
    "agents",
    "agent",
    "new agent",
    "built agent",
    "edit agent",
    "agent changes",
    "delete agent",
    "playground",
    "runs",
    "run trace",
    "keys",
    "members",
    "billing",
    "invoice",
    "password",
    "audit log",
]


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("name", PAGE_NAMES)
def test_page_layout(console: Console, pages: dict[str, str], owner_context: Any, name: str, viewport: str) -> None:
    path = pages[name]
    page = owner_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.set_viewport_size(VIEWPORTS[viewport])
        answer = page.goto(f"{console.url}{path}")
        assert answer is not None
        assert answer.status == 200, f"{path}: {answer.status}"
        page.wait_for_load_state("load")
        page.screenshot(path=str(console.shots / f"layout-{name.replace(' ', '-')}-{viewport}.png"), full_page=True)

        overflow = _overflow(page)
        assert overflow["scrollWidth"] <= overflow["innerWidth"], f"{path} scrolls sideways at {viewport}: {overflow}"
        assert _unnamed_controls(page) == [], f"{path}: form controls without an accessible name"
        _follow_the_navigation_by_keyboard(page, console, path)
        assert errors == []
    finally:
        page.close()
