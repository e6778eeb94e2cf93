"""Traces a person can read, in a real browser on a desktop (1280×800) and a phone (390×844): an id pasted into the
runs page's search box opens its trace; the timeline has tick labels under it and a label on every bar, wide enough
to read on a phone; a tool call's arguments and result are on the page; the page never scrolls sideways."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.platform.console.browser.served import MODELS, Console, sign_in

pytestmark = pytest.mark.slow

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
_ENDED = ("completed", "failed", "incomplete", "cancelled", "expired", "requires_action")
READABLE_BAR_PX = 300  # on a phone a bar's track spans the screen, not a few pixels


@pytest.fixture(scope="module")
def executions(console: Console) -> dict[str, str]:
    """A run and a response of an agent that uses its calculator (executed in the server)."""
    with console.api() as api:
        body = {"name": "calc-trace-bot", "model": MODELS[0], "instructions": "Answer briefly."}
        agent = api.post("/v1/agents", json=body | {"tools": [{"type": "calculator"}]})
        assert agent.status_code == 201, agent.text
        ask = "Use the calculator please: expression=6*7"
        run = api.post(
            "/v1/runs",
            json={"agent_id": agent.json()["id"], "thread": {"messages": [{"role": "user", "content": ask}]}},
        )
        assert run.status_code in (200, 201), run.text
        thread_id, run_id = run.json()["thread_id"], run.json()["id"]
        deadline = time.monotonic() + 60
        while api.get(f"/v1/threads/{thread_id}/runs/{run_id}").json()["status"] not in _ENDED:
            assert time.monotonic() < deadline, "the run never ended"
            time.sleep(0.05)
        response = api.post(
            "/v1/responses", json={"model": MODELS[0], "prompt": {"id": agent.json()["id"]}, "input": ask}
        )
        assert response.status_code == 200, response.text
    return {"run": run_id, "response": response.json()["id"]}


def _overflow(page: Any) -> dict[str, Any]:
    return dict(
        page.evaluate(
            """() => ({
                scrollWidth: document.scrollingElement.scrollWidth,
                innerWidth: window.innerWidth,
                wide: [...document.querySelectorAll('body *')]
                    .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.scroll'))
                    .slice(0, 5).map(e => e.tagName.toLowerCase() + '.' + e.className),
            })"""
        )
    )


def _axis(page: Any) -> dict[str, Any]:
    """The tick labels (text, visible, inside the figure) and the bars' tracks' widths."""
    return dict(
        page.evaluate(
            """() => {
                const figure = document.querySelector('figure.trace-timeline').getBoundingClientRect();
                const ticks = [...document.querySelectorAll('.trace-ticks .tick')].map(t => {
                    const r = t.getBoundingClientRect();
                    return {text: t.textContent, left: r.left, right: r.right, width: r.width};
                });
                const tracks = [...document.querySelectorAll('.trace-rows svg.track')]
                    .map(s => s.getBoundingClientRect().width);
                const labels = [...document.querySelectorAll('.trace-rows li:not(.axis) .trace-label')]
                    .map(l => l.textContent.trim());
                return {ticks, tracks, labels, left: figure.left, right: figure.right};
            }"""
        )
    )


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_a_pasted_run_id_opens_a_trace_with_a_labelled_axis_and_no_sideways_scrolling(
    console: Console, page: Any, executions: dict[str, str], viewport: str
) -> None:
    page.set_viewport_size(VIEWPORTS[viewport])
    sign_in(page, console, "viewer")
    page.goto(f"{console.url}/console/runs")
    page.get_by_label("Run, response or chat completion id").fill(executions["run"])
    page.get_by_label("Run, response or chat completion id").press("Enter")
    page.wait_for_url(re.compile(re.escape(f"/console/runs/{executions['run']}") + "$"))
    page.get_by_role("heading", name="Timeline").wait_for()

    axis = _axis(page)
    texts = [t["text"] for t in axis["ticks"]]
    assert texts[0] == "0 ms"
    assert len(texts) >= 2
    assert all(re.fullmatch(r"[\d.]+ (ms|s|min)", text) for text in texts), texts
    assert all(t["width"] > 0 and axis["left"] <= t["left"] and t["right"] <= axis["right"] for t in axis["ticks"])
    assert axis["labels"][0].startswith("queue")
    assert any("calculator" in label for label in axis["labels"])  # every bar says what it was
    assert min(axis["tracks"]) >= (READABLE_BAR_PX if viewport == "phone" else 600)

    step = page.locator("section.trace-step", has_text="calculator").first
    assert '"expression": "6*7"' in step.locator("pre.json").first.inner_text()  # its arguments
    assert '"result": 42' in step.locator("pre.json").nth(1).inner_text()  # its result
    assert "Use the calculator please" in page.locator("#trace-input").inner_text()
    assert page.locator("#trace-answer").inner_text().strip()
    page.screenshot(path=str(console.shots / f"trace-{viewport}.png"), full_page=True)
    overflow = _overflow(page)
    assert overflow["scrollWidth"] <= overflow["innerWidth"], overflow
    assert page.errors == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_a_response_s_trace_shows_its_output_items_and_an_unknown_id_is_named(
    console: Console, page: Any, executions: dict[str, str], viewport: str
) -> None:
    page.set_viewport_size(VIEWPORTS[viewport])
    sign_in(page, console, "viewer")
    page.goto(f"{console.url}/console/runs")
    page.locator("#runs a", has_text=executions["response"]).click()  # listed with the agent runs
    page.get_by_role("heading", name="Output", level=2).wait_for()
    output = page.locator("#trace-output").inner_text()
    assert "calculator" in output
    assert '"result": 42' in output
    assert page.locator(".trace-ticks .tick").first.inner_text() == "0 ms"
    page.screenshot(path=str(console.shots / f"trace-response-{viewport}.png"), full_page=True)
    overflow = _overflow(page)
    assert overflow["scrollWidth"] <= overflow["innerWidth"], overflow

    page.goto(f"{console.url}/console/runs")
    page.get_by_label("Run, response or chat completion id").fill("resp_nobodys")
    page.get_by_role("button", name="Open").click()
    page.get_by_role("alert").wait_for()
    assert "resp_nobodys" in page.get_by_role("alert").inner_text()
    overflow = _overflow(page)
    assert overflow["scrollWidth"] <= overflow["innerWidth"], overflow
    assert page.elsewhere == []  # type: ignore[attr-defined]
