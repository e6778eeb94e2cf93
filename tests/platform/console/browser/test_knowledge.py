"""The knowledge pages in a real browser: an admin creates a store, uploads a document with the file input, watches
its ingestion reach completed without reloading (the files list polls), searches it, attaches the store to an agent
and asks that agent in the playground, whose file_search call finds the document and whose answer cites it. At phone
width a file dropped on the drop zone is uploaded the same way, and no page scrolls sideways."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.platform.console.browser.served import MODELS, Console, sign_in

pytestmark = pytest.mark.slow

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
DOCUMENT = (
    "Harbour handbook\n\nThe Zanzibar lighthouse keeper rings the brass bell at dusk.\n"
    "Ferries to the outer islands leave from pier 4 every weekday at 07:15.\n"
)


@pytest.fixture(scope="module")
def agent(console: Console) -> str:
    body = {"name": "harbour-guide", "model": MODELS[0], "instructions": "Answer from the handbook."}
    with console.api() as api:
        made = api.post("/v1/agents", json=body)
    assert made.status_code in (200, 201), made.text
    return str(made.json()["id"])


def _no_sideways_scroll(page: Any, where: str) -> None:
    widths = page.evaluate("({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")
    assert widths["scroll"] <= widths["inner"], f"{where} scrolls sideways: {widths}"


def _create_store(page: Any, name: str) -> str:
    page.get_by_role("link", name="Knowledge").click()
    page.get_by_role("heading", name="Knowledge", exact=True).wait_for()
    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Create store").click()
    page.wait_for_url(re.compile(r"/console/knowledge/vs_\w+$"))
    page.get_by_role("heading", name=name).wait_for()
    return str(page.url.rsplit("/", 1)[1])


def test_a_document_is_uploaded_ingested_searched_and_found_by_an_agent(
    console: Console, page: Any, agent: str, tmp_path: Path
) -> None:
    sign_in(page, console, "admin")
    store_id = _create_store(page, "harbour-handbook")
    assert page.locator("#dropzone").is_visible()  # the script is loaded on this page and shows the drop zone
    document = tmp_path / "handbook.txt"
    document.write_text(DOCUMENT)
    page.get_by_label("Documents to upload").set_input_files(str(document))
    page.get_by_role("button", name="Upload and attach").click()
    page.wait_for_url(re.compile(rf"/console/knowledge/{store_id}$"))
    row = page.locator("#knowledge-files tbody tr", has_text="handbook.txt")
    row.locator(".status.completed").wait_for()  # the list refreshed itself until ingestion ended
    page.locator("#store-counts", has_text="1 completed").wait_for()
    page.wait_for_function("() => !document.querySelector('#store-files[hx-trigger]')")  # it stopped polling

    page.get_by_label("Query").fill("Zanzibar lighthouse bell")
    page.get_by_label("Results").fill("3")
    page.get_by_role("button", name="Search", exact=True).click()
    first = page.locator("#search-results li").first
    first.wait_for()
    assert first.locator(".hit-file").inner_text() == "handbook.txt"
    assert "Zanzibar lighthouse keeper" in first.locator(".hit-text").inner_text()
    page.screenshot(path=str(console.shots / "knowledge-store.png"), full_page=True)

    page.get_by_label("Agent", exact=True).select_option(label="harbour-guide (v1)")
    page.get_by_role("button", name="Attach as a new version").click()
    page.wait_for_url(re.compile(rf"/console/agents/{agent}$"))
    page.get_by_text("file_search").first.wait_for()

    page.get_by_role("link", name="Playground").click()
    page.get_by_label("Agent").select_option(label=f"harbour-guide (v2, {MODELS[0]})")
    page.get_by_label("Message").fill("Use file_search with query=Zanzibar lighthouse")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(re.compile(r"/console/playground/run_\w+$"))
    page.locator("#run-status", has_text="completed").wait_for(timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#result[data-streaming]')")  # the server's rendering
    page.locator("#chat p.tool", has_text="file_search(").first.wait_for()  # the agent called the tool ...
    result = page.locator("#chat li.msg.tool").first.inner_text()
    assert '"filename": "handbook.txt"' in result  # ... and its result names the uploaded file
    assert "Zanzibar lighthouse keeper" in result
    answer = page.locator("#chat li.msg.assistant").last
    assert "Zanzibar lighthouse keeper" in answer.locator("p.text").inner_text()  # the answer repeats the passage ...
    assert answer.locator("p.cites").inner_text() == "Cites handbook.txt"  # ... and cites its file
    page.screenshot(path=str(console.shots / "knowledge-playground.png"), full_page=True)
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]


PHONE_FILE = "a-document-with-a-long-file-name-that-must-wrap-on-a-phone.md"
_DROPPED = f"""() => {{
  const dropped = new DataTransfer();
  const text = "# Tides\\n\\nSpring tides come twice a month, near the new and the full moon.\\n";
  dropped.items.add(new File([text], "{PHONE_FILE}", {{type: "text/markdown"}}));
  return dropped;
}}"""


def test_files_dropped_on_a_phone_are_uploaded_and_the_pages_fit_it(console: Console, page: Any) -> None:
    page.set_viewport_size(VIEWPORTS["phone"])
    sign_in(page, console, "admin")
    store_id = _create_store(page, "a-store-with-a-rather-long-name-for-a-phone-screen")
    page.locator("#dropzone").dispatch_event("drop", {"dataTransfer": page.evaluate_handle(_DROPPED)})
    page.locator("#knowledge-files .status.completed").wait_for()  # dropped, uploaded, ingested
    assert PHONE_FILE in page.locator("#knowledge-files").inner_text()
    page.get_by_label("Query").fill("spring tides moon")
    page.get_by_role("button", name="Search", exact=True).click()
    page.locator("#search-results li").first.wait_for()
    _no_sideways_scroll(page, "the store page")
    page.screenshot(path=str(console.shots / "knowledge-store-phone.png"), full_page=True)
    file_id = page.locator("#knowledge-files tbody tr").first.get_attribute("id").removeprefix("file-")
    for path in ("", f"/{store_id}/delete", f"/{store_id}/files/{file_id}/detach"):
        page.goto(f"{console.url}/console/knowledge{path}")
        page.locator("h1").wait_for()
        _no_sideways_scroll(page, f"/console/knowledge{path}")
    page.goto(f"{console.url}/console/knowledge")
    page.screenshot(path=str(console.shots / "knowledge-phone.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]
