"""The playground in a real browser: a conversation with an agent on the simulated fleet running on the wall clock
(``TIME_SCALE``), so its answers arrive in pieces as the simulated replica generates them; a tool call shown as it
happens, a pending call approved, and each model call's chip-µs, TTFT and replica."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.platform.console.browser.served import MODELS, Console, sign_in
from tests.platform.console.factories import PASSWORD

pytestmark = pytest.mark.slow

TIME_SCALE = 2.0  # the conftest's server: a simulated second lasts two (an answer of 100 tokens takes ~4 s)
_ENDED = ("completed", "failed", "incomplete", "cancelled", "expired")
_WATCH = """() => {
  const answers = document.querySelectorAll('#chat li.msg.assistant p.text');
  const last = answers[answers.length - 1];
  return {
    text: last ? last.textContent.length : 0,
    status: (document.getElementById('run-status') || {}).textContent || '',
    tools: Array.from(document.querySelectorAll('#chat li[id^="s-"]')).map((li) => li.textContent),
  };
}"""


@pytest.fixture(scope="module")
def agent(console: Console) -> str:
    """An agent with a calculator it may use freely and a clock it must ask for."""
    tools = [{"type": "calculator"}, {"type": "current_time", "requires_approval": True}]
    body = {"name": "shift-helper", "model": MODELS[0], "instructions": "Answer briefly.", "tools": tools}
    with console.api() as api:
        made = api.post("/v1/agents", json=body)
    assert made.status_code in (200, 201), made.text
    return str(made.json()["id"])


def _watch(page: Any, until: str, timeout_s: float = 60) -> list[dict[str, Any]]:
    """What the page showed every 50 ms (the answer's length so far, the run's status, the tool calls under way)
    until the run's status is ``until`` or the run ended."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen.append(page.evaluate(_WATCH))
        if seen[-1]["status"] in (until, *_ENDED):
            return seen
        page.wait_for_timeout(50)
    raise AssertionError(f"the run never reached {until}: {seen[-1]}")


def _model_calls(page: Any) -> list[tuple[int, float, str]]:
    rows = page.locator("#model-calls tbody tr")
    return [
        (
            int(rows.nth(i).locator("td.chip-us").inner_text().replace(",", "")),
            float(rows.nth(i).locator("td.ttft").inner_text()),
            rows.nth(i).locator("td.replica").inner_text(),
        )
        for i in range(rows.count())
    ]


def test_chat_streamed_with_tool_calls_an_approval_and_each_answer_s_compute(
    console: Console, page: Any, agent: str
) -> None:
    sign_in(page, console, "admin")
    page.get_by_role("link", name="Playground").click()
    page.get_by_label("Agent").select_option(label=f"shift-helper (v1, {MODELS[0]})")
    page.get_by_label("Message").fill("Use the calculator: expression=6*7")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(re.compile(r"/console/playground/run_\w+$"))

    seen = _watch(page, until="completed")
    assert seen[-1]["status"] == "completed"
    before_end = [s for s in seen if s["status"] != "completed"]
    lengths = [s["text"] for s in before_end if s["text"]]
    assert len(set(lengths)) >= 3, lengths  # the answer arrived in pieces while the run went on ...
    assert lengths == sorted(lengths)  # ... each piece added to the text before it
    tools = [t for s in before_end for t in s["tools"]]
    assert any("calculator" in t for t in tools)  # the tool call was shown while the run went on
    assert any('{"result": 42}' in t for t in tools)  # and its result when it ended
    page.locator("#model-calls tbody tr").nth(1).wait_for()
    page.wait_for_function("() => !document.querySelector('#result[data-streaming]')")  # the server's rendering
    calls = _model_calls(page)
    assert len(calls) == 2  # the tool call's model call and the answer's
    for chip_us, ttft_ms, replica in calls:
        assert chip_us > 0
        assert ttft_ms > 0
        assert replica.startswith(f"{MODELS[0]}/")
    assert int(page.locator("#run-chip-us").inner_text().replace(",", "")) == sum(c[0] for c in calls)
    first_answer = page.locator("#chat li.msg.assistant p.text").last.inner_text()
    assert first_answer.startswith('Result of calculator: {"result": 42}')

    # The next message continues the thread; the clock needs an approval first.
    page.get_by_label("Next message").fill("And what is the current_time? timezone=UTC")
    page.get_by_role("button", name="Send").click()
    page.get_by_role("heading", name="Waiting for your approval").wait_for()
    assert "current_time" in page.locator("#pending").inner_text()
    assert page.locator("#run-status").inner_text() == "requires_action"
    assert page.locator("#chat li.msg.user").count() == 2  # the conversation so far
    page.get_by_role("button", name="Approve").click()
    seen = _watch(page, until="completed")
    assert seen[-1]["status"] == "completed"
    lengths = [s["text"] for s in seen if s["status"] != "completed" and s["text"]]
    assert len(set(lengths)) >= 2, lengths  # this answer streamed too
    page.wait_for_function("() => !document.querySelector('#result[data-streaming]')")
    page.locator("#chat li.msg.tool", has_text='"timezone": "UTC"').first.wait_for()  # the clock's answer
    assert page.locator("#chat li.msg.user").count() == 2
    assert page.locator("#chat").inner_text().count("Result of calculator") == 1
    assert len(_model_calls(page)) == 2  # this answer's own model calls, with their compute
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]
    page.screenshot(path=str(console.shots / "playground.png"), full_page=True)
    # (after the screenshot: Playwright leaves empty style attributes that htmx would carry into the next page)
    page.get_by_role("link", name="New chat").click()
    page.get_by_label("Message", exact=True).wait_for()
    assert page.locator("#chat").count() == 0


def test_without_javascript_the_page_refreshes_until_the_answer_is_there(
    console: Console, browser: Any, agent: str
) -> None:
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(f"{console.url}/console/playground")
        page.get_by_label("Email").fill(console.emails["admin"])
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"{console.url}/console/playground")
        page.get_by_label("Agent").select_option(label=f"shift-helper (v1, {MODELS[0]})")
        page.get_by_label("Message").fill("Say something about trains.")
        page.get_by_role("button", name="Send").click()
        page.wait_for_url(re.compile(r"/console/playground/run_\w+$"))
        page.locator("#run-status", has_text="completed").wait_for(timeout=60_000)  # a plain page, reloaded
        assert page.locator("#chat li.msg.assistant p.text").count() == 1
        assert page.locator("#model-calls td.replica").inner_text().startswith(f"{MODELS[0]}/")
    finally:
        context.close()
