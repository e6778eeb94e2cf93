"""The knowledge pages over HTTP: a store created, documents uploaded and ingested (inline, in the test's event
loop) until the page stops polling, a search that ranks the chunk holding a unique phrase first, attaching the
store to an agent as a new version; bad input refused with nothing changed; roles and tenancy."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from switchyard.platform.knowledge.vector_stores import INGEST_TASK
from tests.platform.agents_api.factories import make_agent, run_inline
from tests.platform.console.factories import ConsoleTenant, page_csrf, sign_in

MAX_FILE_BYTES = 4096  # small, so an oversize upload is cheap to send
_STORE_PAGE = re.compile(r"^/console/knowledge/(vs_\w+)$")
DOCS = {
    "ferry.txt": b"The Aurora ferry leaves pier 4 at 07:15 every weekday. Quokka lanterns mark the gangway.",
    "museum.txt": b"The maritime museum opens at ten and is closed on Mondays; the ferry timetable hangs inside.",
}


@pytest.fixture
def settings(database_url: str, tmp_path: Path, shared_apps: Any) -> Any:
    return shared_apps.settings(data_dir=tmp_path / "data", database_url=database_url, max_file_bytes=MAX_FILE_BYTES)


async def _signed_in(console: Any, tenant: ConsoleTenant, role: str) -> str:
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails[role])).status_code == 303
    return await page_csrf(console, "/console/knowledge")


async def _create_store(console: Any, csrf: str, name: str = "harbour", days: str = "") -> str:
    made = await console.post("/console/knowledge", data={"name": name, "expires_after_days": days, "csrf_token": csrf})
    assert made.status_code == 303, made.text
    found = _STORE_PAGE.match(made.headers["location"])
    assert found, made.headers["location"]
    return found.group(1)


async def _upload(console: Any, csrf: str, store_id: str, docs: dict[str, bytes]) -> Any:
    parts = [("file", (name, data, "text/plain")) for name, data in docs.items()]
    return await console.post(f"/console/knowledge/{store_id}/files", data={"csrf_token": csrf}, files=parts)


async def _settled_files(console: Any, store_id: str) -> str:
    """The files fragment once no file is in progress; every answer before it polls again, the last one does not."""
    for _ in range(500):
        fragment = await console.get(f"/console/knowledge/{store_id}/files")
        assert fragment.status_code == 200, fragment.text
        busy = "in_progress</span>" in fragment.text
        assert ('hx-trigger="every 2s"' in fragment.text) == busy
        if not busy:
            return str(fragment.text)
        await asyncio.sleep(0.02)
    raise AssertionError(f"{store_id} stayed in progress")


async def _api_files(console: Any, tenant: ConsoleTenant) -> list[str]:
    listed = await console.get("/v1/files", headers=tenant.headers("viewer"))
    assert listed.status_code == 200, listed.text
    return [f["filename"] for f in listed.json()["data"]]


async def _api_store_files(console: Any, tenant: ConsoleTenant, store_id: str) -> list[dict[str, Any]]:
    listed = await console.get(f"/v1/vector_stores/{store_id}/files", headers=tenant.headers("viewer"))
    assert listed.status_code == 200, listed.text
    return list(listed.json()["data"])


class _HeldJobs:
    """Keeps the jobs sent (so the files stay in progress) until the test lets the inline worker run them."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any]]] = []

    def send_task(self, name: str, args: Any) -> None:
        self.sent.append((name, list(args)))


async def test_a_store_is_created_its_documents_ingested_and_searched(console: Any, make_console_tenant: Any) -> None:
    worker = run_inline(console)
    held = console.app.state.jobs = _HeldJobs()
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "admin")
    empty = await console.get("/console/knowledge")
    assert "No vector stores yet" in empty.text
    assert "Create a store above" in empty.text

    store_id = await _create_store(console, csrf, days="7")
    uploaded = await _upload(console, csrf, store_id, DOCS)
    assert uploaded.status_code == 303, uploaded.text
    assert uploaded.headers["location"] == f"/console/knowledge/{store_id}"
    assert [name for name, _ in held.sent] == [INGEST_TASK, INGEST_TASK]  # one job a file, as the API sends
    polling = await console.get(f"/console/knowledge/{store_id}")
    assert 'hx-trigger="every 2s"' in polling.text  # in progress: the list refreshes itself ...
    assert '<meta http-equiv="refresh" content="2">' in polling.text  # ... and the page, without JavaScript
    assert polling.text.count("in_progress</span>") == 3  # the store and its two files
    for name, args in held.sent:
        worker.send_task(name, args)
    files = await _settled_files(console, store_id)
    rows = files.split('id="knowledge-files"', 1)[1]
    assert rows.count("completed</span>") == 2
    assert "ferry.txt" in rows
    assert "museum.txt" in rows
    assert sorted(await _api_files(console, tenant)) == ["ferry.txt", "museum.txt"]  # purpose assistants, as the API
    assert {f["status"] for f in await _api_store_files(console, tenant, store_id)} == {"completed"}

    listed = await console.get("/console/knowledge")
    assert "harbour" in listed.text
    assert "2 completed" in listed.text
    assert "7 days idle" in listed.text
    page = await console.get(f"/console/knowledge/{store_id}")
    assert page.status_code == 200
    assert "/static/knowledge.js" in page.text
    assert 'hx-trigger="every 2s"' not in page.text  # nothing in progress: no polling
    assert 'http-equiv="refresh"' not in page.text

    found = await console.post(
        f"/console/knowledge/{store_id}/search",
        data={"query": "quokka lanterns", "max_num_results": "5", "csrf_token": csrf},
    )
    assert found.status_code == 200, found.text
    results = found.text.split('id="search-results"', 1)[1]
    names = re.findall(r'<strong class="hit-file">([^<]+)</strong>', results)
    assert names[0] == "ferry.txt"  # the chunk with the unique phrase ranks first
    assert "Quokka lanterns mark the gangway" in results


async def test_a_file_that_cannot_be_read_shows_failed_with_its_error(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "admin")
    store_id = await _create_store(console, csrf)
    png = {"photo.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256))}
    parts = [("file", (name, data, "image/png")) for name, data in png.items()]
    sent = await console.post(f"/console/knowledge/{store_id}/files", data={"csrf_token": csrf}, files=parts)
    assert sent.status_code == 303, sent.text
    rows = (await _settled_files(console, store_id)).split('id="knowledge-files"', 1)[1]
    assert "failed</span>" in rows
    assert "unsupported_file: " in rows
    assert "0 completed, 0 in progress, 1 failed" in (await console.get(f"/console/knowledge/{store_id}")).text


async def test_search_results_are_escaped(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "admin")
    store_id = await _create_store(console, csrf)
    doc = {"<b>bold</b>.txt": b"zebracrossing <script>alert(1)</script> is markup, not a script"}
    assert (await _upload(console, csrf, store_id, doc)).status_code == 303
    await _settled_files(console, store_id)
    found = await console.post(
        f"/console/knowledge/{store_id}/search",
        data={"query": "zebracrossing", "max_num_results": "1", "csrf_token": csrf},
    )
    assert found.status_code == 200, found.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in found.text
    assert "<script>alert" not in found.text
    assert "&lt;b&gt;bold&lt;/b&gt;.txt" in found.text


async def test_bad_uploads_are_refused_with_a_reason_and_store_nothing(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "admin")
    store_id = await _create_store(console, csrf)

    nothing = await console.post(f"/console/knowledge/{store_id}/files", data={"csrf_token": csrf})
    assert nothing.status_code == 400
    assert "Choose a file to upload." in nothing.text
    empty = await _upload(console, csrf, store_id, {"ok.txt": b"fine", "blank.txt": b""})
    assert empty.status_code == 400
    assert "“blank.txt” is empty" in empty.text
    large = await _upload(console, csrf, store_id, {"ok.txt": b"fine", "big.txt": b"x" * (MAX_FILE_BYTES + 1)})
    assert large.status_code == 413
    assert "“big.txt”" in large.text
    assert f"{MAX_FILE_BYTES:,} bytes" in large.text
    assert "Nothing was uploaded." in large.text
    huge = await _upload(console, csrf, store_id, {"huge.txt": b"x" * (MAX_FILE_BYTES + 70_000)})
    assert huge.status_code == 413  # past what one upload's body may carry: refused as it arrives
    assert "Nothing was stored." in huge.text
    unknown = await _upload(console, csrf, "vs_nosuchstore", {"ok.txt": b"fine"})
    assert unknown.status_code == 404

    assert await _api_files(console, tenant) == []  # "ok.txt" went back with the refused file
    assert await _api_store_files(console, tenant, store_id) == []


async def test_a_store_needs_a_name_and_an_expiry_in_days(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "admin")
    for form, message in [
        ({"name": " "}, "Give the store a name."),
        ({"name": "docs", "expires_after_days": "0"}, "from 1 to 365"),
        ({"name": "docs", "expires_after_days": "soon"}, "from 1 to 365"),
        ({"name": "d" * 300}, "at most 256 characters"),
    ]:
        refused = await console.post("/console/knowledge", data={**form, "csrf_token": csrf})
        assert refused.status_code == 400, form
        assert message in refused.text
    listed = await console.get("/v1/vector_stores", headers=tenant.headers("viewer"))
    assert listed.json()["data"] == []


async def test_a_viewer_reads_the_pages_but_changes_nothing(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "admin")
    store_id = await _create_store(console, csrf)
    assert (await _upload(console, csrf, store_id, {"ferry.txt": DOCS["ferry.txt"]})).status_code == 303
    await _settled_files(console, store_id)

    csrf = await _signed_in(console, tenant, "viewer")
    listed = await console.get("/console/knowledge")
    assert "harbour" in listed.text
    assert "Create store" not in listed.text
    page = await console.get(f"/console/knowledge/{store_id}")
    assert page.status_code == 200
    assert "ferry.txt" in page.text
    for control in ("Upload documents", "Detach", "Try a search", "Attach to an agent", "Delete store"):
        assert control not in page.text
    assert (await _upload(console, csrf, store_id, {"more.txt": b"more"})).status_code == 403
    assert (await console.post("/console/knowledge", data={"name": "x", "csrf_token": csrf})).status_code == 403
    searched = await console.post(f"/console/knowledge/{store_id}/search", data={"query": "ferry", "csrf_token": csrf})
    assert searched.status_code == 403
    assert (await console.post(f"/console/knowledge/{store_id}/delete", data={"csrf_token": csrf})).status_code == 403
    assert await _api_files(console, tenant) == ["ferry.txt"]
    assert len(await _api_store_files(console, tenant, store_id)) == 1


async def test_another_tenants_store_is_not_found(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    owner, other = await make_console_tenant(), await make_console_tenant()
    csrf = await _signed_in(console, owner, "admin")
    store_id = await _create_store(console, csrf, name="private-harbour")
    assert (await _upload(console, csrf, store_id, {"ferry.txt": DOCS["ferry.txt"]})).status_code == 303
    await _settled_files(console, store_id)
    agent = await make_agent(console, other)

    csrf = await _signed_in(console, other, "owner")
    assert "private-harbour" not in (await console.get("/console/knowledge")).text
    for path in ("", "/files", "/delete", f"/files/{(await _api_files_ids(console, owner))[0]}/detach"):
        assert (await console.get(f"/console/knowledge/{store_id}{path}")).status_code == 404, path
    for path, form in [
        ("/files", {}),
        ("/search", {"query": "ferry"}),
        ("/attach", {"agent_id": agent["id"]}),
        ("/delete", {}),
    ]:
        answer = await console.post(f"/console/knowledge/{store_id}{path}", data={**form, "csrf_token": csrf})
        assert answer.status_code == 404, path
    assert len(await _api_store_files(console, owner, store_id)) == 1
    assert (await console.get(f"/v1/agents/{agent['id']}", headers=other.headers())).json()["version"] == 1


async def _api_files_ids(console: Any, tenant: ConsoleTenant) -> list[str]:
    listed = await console.get("/v1/files", headers=tenant.headers("viewer"))
    return [f["id"] for f in listed.json()["data"]]


async def test_attaching_the_store_makes_a_new_agent_version_with_file_search(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "admin")
    store_id = await _create_store(console, csrf)
    other_store = await _create_store(console, csrf, name="other")
    plain = await make_agent(console, tenant, name="plain", tools=[{"type": "calculator"}])
    searching = await make_agent(
        console, tenant, name="searching", tools=[{"type": "file_search", "vector_store_ids": [other_store]}]
    )

    attached = await console.post(
        f"/console/knowledge/{store_id}/attach", data={"agent_id": plain["id"], "csrf_token": csrf}
    )
    assert attached.status_code == 303, attached.text
    assert attached.headers["location"] == f"/console/agents/{plain['id']}"
    agent = (await console.get(f"/v1/agents/{plain['id']}", headers=tenant.headers())).json()
    assert agent["version"] == 2
    assert agent["tools"][0]["type"] == "calculator"
    assert [(t["type"], t["vector_store_ids"]) for t in agent["tools"][1:]] == [("file_search", [store_id])]
    audit = await console.get("/v1/audit-log", headers=tenant.headers())
    assert any(e["action"] == "agent.update" and e["target_id"] == plain["id"] for e in audit.json()["data"])

    again = await console.post(
        f"/console/knowledge/{store_id}/attach", data={"agent_id": plain["id"], "csrf_token": csrf}
    )
    assert again.status_code == 200
    assert "searches this store already" in again.text
    assert (await console.get(f"/v1/agents/{plain['id']}", headers=tenant.headers())).json()["version"] == 2

    added = await console.post(
        f"/console/knowledge/{store_id}/attach", data={"agent_id": searching["id"], "csrf_token": csrf}
    )
    assert added.status_code == 303, added.text
    agent = (await console.get(f"/v1/agents/{searching['id']}", headers=tenant.headers())).json()
    assert agent["version"] == 2
    assert [t["vector_store_ids"] for t in agent["tools"]] == [[other_store, store_id]]  # one file_search tool

    unknown = await console.post(
        f"/console/knowledge/{store_id}/attach", data={"agent_id": "agt_nope", "csrf_token": csrf}
    )
    assert unknown.status_code == 400
    assert "Choose one of your agents." in unknown.text


async def test_a_file_is_detached_and_a_store_deleted_after_asking(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "admin")
    store_id = await _create_store(console, csrf)
    assert (await _upload(console, csrf, store_id, DOCS)).status_code == 303
    await _settled_files(console, store_id)
    file_id = (await _api_store_files(console, tenant, store_id))[0]["id"]

    asked = await console.get(f"/console/knowledge/{store_id}/files/{file_id}/detach")
    assert asked.status_code == 200
    assert file_id in asked.text
    assert len(await _api_store_files(console, tenant, store_id)) == 2  # asking changed nothing
    detached = await console.post(f"/console/knowledge/{store_id}/files/{file_id}/detach", data={"csrf_token": csrf})
    assert detached.status_code == 303
    assert [f["id"] for f in await _api_store_files(console, tenant, store_id)] != [file_id]
    assert len(await _api_store_files(console, tenant, store_id)) == 1
    assert len(await _api_files(console, tenant)) == 2  # the file itself stays

    asked = await console.get(f"/console/knowledge/{store_id}/delete")
    assert asked.status_code == 200
    assert "Delete harbour" in asked.text
    deleted = await console.post(f"/console/knowledge/{store_id}/delete", data={"csrf_token": csrf})
    assert deleted.status_code == 303
    assert deleted.headers["location"] == "/console/knowledge"
    assert (await console.get(f"/console/knowledge/{store_id}")).status_code == 404
    assert "No vector stores yet" in (await console.get("/console/knowledge")).text
