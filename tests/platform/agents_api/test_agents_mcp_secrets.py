"""An agent's MCP headers are write-only: sealed in ``agent_versions``, shown to no role (the agent, its versions,
the console's pages), sent to the MCP server when the agent runs; sent back as ``<redacted>`` they are kept, but
never for another server URL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from switchyard.agents import StaticResolver
from switchyard.platform.cli import main
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import AgentVersion, ResponseEventRecord, ResponseRecord
from tests.platform.agents_api.factories import make_agent, run_inline, scripted_model, wait_for_run
from tests.platform.agents_api.mcp_recorder import SECRET_PART, TOKEN, RecordingMcpServer, recording_mcp_server

REDACTED = "<redacted>"


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[RecordingMcpServer]:
    with recording_mcp_server() as server:
        yield server


def _mcp_tool(url: str, authorization: str = TOKEN) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "kb", "server_url": url, "headers": {"Authorization": authorization}}


async def _stored_definitions(client: Any) -> str:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        rows = (await session.execute(select(AgentVersion.definition))).scalars().all()
    return json.dumps(rows)


async def _run(client: Any, tenant: Any, agent_id: str) -> dict[str, Any]:
    headers = tenant.headers("developer")
    started = await client.post(
        "/v1/runs", json={"agent_id": agent_id, "thread": {"messages": [{"content": "look it up"}]}}, headers=headers
    )
    assert started.status_code in (200, 201), started.text
    run = started.json()
    return dict(await wait_for_run(client, run["thread_id"], run["id"], headers, statuses={"completed", "failed"}))


async def test_mcp_headers_are_shown_to_no_role_sealed_at_rest_and_sent_to_the_server(
    client: Any, make_tenant: Any, mcp_server: RecordingMcpServer
) -> None:
    run_inline(
        client, model_factory=scripted_model, resolver=StaticResolver({"mcp.test": ["127.0.0.1"]}), allow_loopback=True
    )
    tenant = await make_tenant()
    created = await make_agent(client, tenant, tools=[_mcp_tool(mcp_server.url())])
    assert created["tools"][0]["headers"] == {"Authorization": REDACTED}
    agent_id = created["id"]
    for role in ("viewer", "developer", "admin", "owner"):
        for path in (f"/v1/agents/{agent_id}", f"/v1/agents/{agent_id}/versions", "/v1/agents"):
            answer = await client.get(path, headers=tenant.headers(role))
            assert answer.status_code == 200, answer.text
            assert SECRET_PART not in answer.text, (role, path)
            assert REDACTED in answer.text, (role, path)
    stored = await _stored_definitions(client)
    assert SECRET_PART not in stored
    assert "sealed:v1:" in stored

    mcp_server.authorizations.clear()
    run = await _run(client, tenant, agent_id)
    assert run["status"] == "completed", run
    assert mcp_server.authorizations  # listed and called
    assert set(mcp_server.authorizations) == {TOKEN}


async def test_redacted_sent_back_keeps_the_header_but_not_for_another_server(
    client: Any, make_tenant: Any, mcp_server: RecordingMcpServer
) -> None:
    run_inline(
        client, model_factory=scripted_model, resolver=StaticResolver({"mcp.test": ["127.0.0.1"]}), allow_loopback=True
    )
    tenant = await make_tenant()
    agent = await make_agent(client, tenant, tools=[_mcp_tool(mcp_server.url())])
    headers = tenant.headers("developer")
    read_back = (await client.get(f"/v1/agents/{agent['id']}", headers=headers)).json()
    same = await client.patch(f"/v1/agents/{agent['id']}", json={"tools": read_back["tools"]}, headers=headers)
    assert same.status_code == 200, same.text
    assert same.json()["version"] == 1  # nothing changed: no new version
    renamed = await client.patch(
        f"/v1/agents/{agent['id']}", json={"instructions": "Be terse.", "tools": read_back["tools"]}, headers=headers
    )
    assert renamed.json()["version"] == 2
    mcp_server.authorizations.clear()
    assert (await _run(client, tenant, agent["id"]))["status"] == "completed"
    assert set(mcp_server.authorizations) == {TOKEN}  # version 2 kept the header

    elsewhere = _mcp_tool("https://collector.example.com/mcp", REDACTED)  # a developer redirecting the secret
    refused = await client.patch(f"/v1/agents/{agent['id']}", json={"tools": [elsewhere]}, headers=headers)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "tools"
    assert "send the value" in error["message"]
    new = await client.post(
        "/v1/agents",
        json={"name": "x", "model": agent["model"], "tools": [_mcp_tool(mcp_server.url(), REDACTED)]},
        headers=headers,
    )
    assert new.status_code == 400, new.text


async def test_the_console_shows_an_agent_s_headers_redacted(
    client: Any, make_tenant: Any, mcp_server: RecordingMcpServer
) -> None:
    from tests.platform.console.factories import add_console_member, sign_in

    tenant = await make_tenant()
    agent = await make_agent(client, tenant, tools=[_mcp_tool(mcp_server.url())])
    rotated = _mcp_tool(mcp_server.url(), TOKEN + "-rotated")  # version 2: a new secret, on the diff's lines
    changed = await client.patch(
        f"/v1/agents/{agent['id']}", json={"tools": [rotated]}, headers=tenant.headers("developer")
    )
    assert changed.json()["version"] == 2
    from switchyard.platform.auth import Role

    await add_console_member(client.app, tenant.id, f"viewer@{tenant.id}.example", Role.VIEWER)
    client.base_url = "https://switchyard.test"
    client.follow_redirects = False
    assert (await sign_in(client, f"viewer@{tenant.id}.example")).status_code == 303
    for path in (f"/console/agents/{agent['id']}", f"/console/agents/{agent['id']}/versions/2/diff"):
        page = await client.get(path)
        assert page.status_code == 200, path
        assert SECRET_PART not in page.text, path


async def test_db_upgrade_seals_what_was_stored_in_clear_before(
    client: Any, make_tenant: Any, mcp_server: RecordingMcpServer, settings: Any
) -> None:
    """Rows written before sealing existed hold the header in clear; ``switchyard db upgrade`` seals or redacts
    them, and the agent still sends it."""
    run_inline(
        client, model_factory=scripted_model, resolver=StaticResolver({"mcp.test": ["127.0.0.1"]}), allow_loopback=True
    )
    tenant = await make_tenant()
    agent = await make_agent(client, tenant, tools=[_mcp_tool(mcp_server.url())])
    answer = await client.post(
        "/v1/responses",
        json={"model": agent["model"], "input": "hi", "tools": [_mcp_tool(mcp_server.url()) | {"server_label": "r"}]},
        headers=tenant.headers("developer"),
    )
    response_id = answer.json()["id"]
    clear = {"Authorization": TOKEN}
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:  # as an older version stored them
        version = (await session.execute(select(AgentVersion))).scalars().one()
        definition = json.loads(json.dumps(version.definition))
        definition["tools"][0]["headers"] = clear
        version.definition = definition
        row = await session.get(ResponseRecord, response_id)
        assert row is not None
        request = json.loads(json.dumps(row.request))
        request["spec"]["tools"][0]["headers"] = clear
        request["echo"]["tools"][0]["headers"] = clear
        row.request = request
        shown = {"type": "response.created", "response": {"id": response_id, "tools": request["echo"]["tools"]}}
        session.add(
            ResponseEventRecord(
                id="revt_legacy",
                tenant_id=tenant.id,
                response_id=response_id,
                sequence_number=0,
                event="response.created",
                data=shown,
            )
        )
    assert SECRET_PART in await _stored_everything(client)

    env = {"SWITCHYARD_DATA_DIR": str(settings.data_dir), "SWITCHYARD_DATABASE_URL": settings.database_url}
    upgraded = await asyncio.to_thread(CliRunner(env=env).invoke, main, ["db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    assert "sealed the MCP credentials stored in clear (3 rows)" in upgraded.output
    assert SECRET_PART not in await _stored_everything(client)
    again = await asyncio.to_thread(CliRunner(env=env).invoke, main, ["db", "upgrade"])
    assert "sealed" not in again.output  # nothing left to seal

    mcp_server.authorizations.clear()
    assert (await _run(client, tenant, agent["id"]))["status"] == "completed"
    assert set(mcp_server.authorizations) == {TOKEN}


async def _stored_everything(client: Any) -> str:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        rows = [
            *(await session.execute(select(AgentVersion.definition))).scalars(),
            *(await session.execute(select(ResponseRecord.request))).scalars(),
            *(await session.execute(select(ResponseEventRecord.data))).scalars(),
        ]
    return json.dumps(rows)
