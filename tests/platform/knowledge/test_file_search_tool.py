"""The ``file_search`` tool through the official ``openai`` client: a response searches the tenant's vector store,
shows a ``file_search_call`` (its results when included) and an answer citing the file; an agent's and a workflow's
``file_search`` search on the server the same way; another tenant's store is the call's error."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
from openai.types.responses import ResponseFileSearchToolCall, ResponseOutputMessage
from sqlalchemy import select

from switchyard.platform.db import TenantScope
from switchyard.platform.models import UsageEvent
from tests.platform.agents_api.factories import make_agent, run_inline

DOCS = {
    "ferry.txt": b"The Aurora ferry leaves pier 4 at 07:15 every weekday and returns at 18:40.",
    "museum.txt": b"The maritime museum opens at ten and is closed on Mondays.",
}


def _sdk(client: Any, tenant: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://switchyard.test/v1", api_key=tenant.keys["developer"], http_client=client, max_retries=0
    )


async def _store(client: Any, sdk: openai.AsyncOpenAI) -> tuple[str, dict[str, str]]:
    files = {
        name: (await sdk.files.create(file=(name, data, "text/plain"), purpose="assistants")).id
        for name, data in DOCS.items()
    }
    store = await sdk.vector_stores.create(name="harbour", file_ids=list(files.values()))
    for _ in range(500):
        if (await sdk.vector_stores.retrieve(store.id)).file_counts.completed == len(files):
            return store.id, files
        await asyncio.sleep(0.02)
    raise AssertionError("the store's files were not ingested")


async def test_a_response_searches_the_store_and_cites_the_file(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    store_id, files = await _store(client, sdk)
    response = await sdk.responses.create(
        model="meta-llama/Llama-3.1-8B-Instruct",
        input="Use file_search with query=Aurora please",
        tools=[{"type": "file_search", "vector_store_ids": [store_id], "max_num_results": 2}],
        include=["file_search_call.results"],
        max_output_tokens=1000,  # room for the simulated model's answer, which quotes the results whole
    )
    assert (response.status, response.error) == ("completed", None)
    call, message = response.output
    assert isinstance(call, ResponseFileSearchToolCall)
    assert (call.status, call.queries) == ("completed", ["Aurora"])
    assert call.results is not None
    assert call.results[0].file_id == files["ferry.txt"]  # the chunk holding the word ranks first
    assert call.results[0].filename == "ferry.txt"
    assert "07:15" in (call.results[0].text or "")
    assert isinstance(message, ResponseOutputMessage)
    (text,) = message.content
    assert text.type == "output_text"
    cited = [a for a in text.annotations if a.type == "file_citation"]
    assert files["ferry.txt"] in {a.file_id for a in cited}  # type: ignore[union-attr]
    assert all(0 < a.index <= len(text.text) for a in cited)  # type: ignore[union-attr]
    without = await sdk.responses.retrieve(response.id)  # results are shown only when asked for
    assert without.output[0].type == "file_search_call"
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        events = list((await session.execute(select(UsageEvent))).scalars())
    searches = [e for e in events if e.event_id.startswith("vss-")]  # (the ingestion's are "ingest:...")
    assert [(e.model, e.prompt_tokens > 0) for e in searches] == [("BAAI/bge-large-en-v1.5", True)]


async def test_an_agents_file_search_and_a_workflows_node_search_on_the_server(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    store_id, _ = await _store(client, sdk)
    tool = {"type": "file_search", "vector_store_ids": [store_id]}
    agent = await make_agent(client, tenant, name="librarian", tools=[tool])
    answered = await sdk.responses.create(model="any", prompt={"id": agent["id"]}, input="file_search query=museum")
    assert answered.status == "completed", answered.error
    assert [item.type for item in answered.output] == ["file_search_call", "message"]
    workflow = {
        "name": "look-up",
        "start": "find",
        "state": {"found": {"type": "object"}},
        "tools": [tool],
        "nodes": [
            {"type": "file_search", "id": "find", "query": "{{ input }}", "output_to": "found", "next": "tell"},
            {"type": "agent", "id": "tell", "agent_id": agent["id"], "input": "Say: {{ state.found.results[0].text }}",
             "next": "done"},
            {"type": "end", "id": "done", "output": "{{ state.found.results[0].filename }}"},
        ],
    }  # fmt: skip
    created = await client.post("/v1/workflows", json=workflow, headers=tenant.headers("developer"))
    assert created.status_code == 201, created.text
    ran = await sdk.responses.create(model="any", prompt={"id": created.json()["id"]}, input="Mondays museum")
    assert ran.status == "completed", ran.error
    assert ran.output_text == "museum.txt"


async def test_another_tenants_store_is_the_calls_error(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    owner, other = await make_tenant(), await make_tenant()
    store_id, _ = await _store(client, _sdk(client, owner))
    response = await _sdk(client, other).responses.create(
        model="meta-llama/Llama-3.1-8B-Instruct",
        input="Use file_search with query=Aurora",
        tools=[{"type": "file_search", "vector_store_ids": [store_id]}],
    )
    call = response.output[0]
    assert isinstance(call, ResponseFileSearchToolCall)
    assert call.status == "failed"
    assert "Aurora" not in response.output_text
