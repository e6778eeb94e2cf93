"""The console's runs list holds every execution (a thread's runs, the responses, the chat and text completions), a
pasted id finds one, and a trace shows what a person needs to read it: input, answer, tool arguments and results, a
labelled time axis; never another tenant's, never a prompt's HTML as HTML."""

from __future__ import annotations

import html
import re
from typing import Any

from tests.platform.agents_api.factories import make_agent, run_inline, scripted_model, wait_for_run
from tests.platform.console.factories import sign_in

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def test_runs_made_through_the_responses_api_with_a_prompt_id_are_listed(
    console: Any, make_console_tenant: Any
) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    made = await console.post(
        "/v1/agents", json={"name": "prompt-bot", "model": MODEL, "instructions": "Be brief."}, headers=tenant.headers()
    )
    agent_id = made.json()["id"]
    body = {"model": MODEL, "prompt": {"id": agent_id}, "input": "Hello", "max_output_tokens": 16}
    stored = await console.post("/v1/responses", json=body, headers=tenant.headers())
    assert stored.status_code == 200, stored.text
    unstored = await console.post("/v1/responses", json={**body, "store": False}, headers=tenant.headers())
    assert unstored.status_code == 200, unstored.text
    plain = await console.post("/v1/responses", json={"model": MODEL, "input": "Hi"}, headers=tenant.headers())
    assert plain.status_code == 200, plain.text

    await sign_in(console, tenant.emails["viewer"])
    listed = await console.get("/console/runs")
    assert stored.json()["id"] in listed.text
    assert "prompt-bot v1" in listed.text
    assert unstored.json()["id"] not in listed.text  # kept for its books only
    assert plain.json()["id"] not in listed.text  # no agent ran it
    status = stored.json()["status"]
    assert stored.json()["id"] in (await console.get(f"/console/runs?agent={agent_id}&status={status}")).text
    assert stored.json()["id"] not in (await console.get("/console/runs?status=expired")).text

    console.cookies.clear()
    await sign_in(console, other.emails["owner"])
    assert stored.json()["id"] not in (await console.get("/console/runs")).text


async def _run(console: Any, tenant: Any, message: str, **agent: Any) -> tuple[str, str, str]:
    """Run a new agent (``agent``'s fields) on a new thread holding ``message``, to its end: (agent, thread, run)."""
    made = await make_agent(console, tenant, **agent)
    created = await console.post(
        "/v1/runs",
        json={"agent_id": made["id"], "thread": {"messages": [{"role": "user", "content": message}]}},
        headers=tenant.headers("developer"),
    )
    assert created.status_code in (200, 201), created.text
    thread_id, run_id = created.json()["thread_id"], created.json()["id"]
    await wait_for_run(console, thread_id, run_id, tenant.headers("developer"), statuses=_ENDED)
    return made["id"], thread_id, run_id


_ENDED = {"completed", "failed", "incomplete", "cancelled", "expired", "requires_action"}


async def test_a_run_s_trace_shows_its_input_its_tool_call_s_arguments_and_result_and_its_answer(
    console: Any, make_console_tenant: Any
) -> None:
    run_inline(console)  # the app's simulated fleet: it calls the calculator when asked to
    tenant = await make_console_tenant()
    agent_id, _, run_id = await _run(
        console, tenant, "Use the calculator please: expression=6*7", name="calc-bot", tools=[{"type": "calculator"}]
    )
    await sign_in(console, tenant.emails["viewer"])
    page = await console.get(f"/console/runs/{run_id}")
    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    assert "Use the calculator please: expression=6*7" in text  # the input message
    step = text[text.index('id="step-1"') :]
    assert "calculator" in step
    assert '"expression": "6*7"' in step  # the arguments, indented JSON
    assert '"result": 42' in step  # the result
    assert f'href="/console/agents/{agent_id}">calc-bot</a>' in text  # the agent by name, linked
    assert re.search(r'id="trace-answer">\s*<pre class="text">[^<]+</pre>', page.text)  # the final answer
    # a labelled time axis under the timeline, and a row per span with its label
    assert re.search(r'<span role="listitem" class="tick at-0">0 ms</span>', page.text)
    assert re.search(r'class="tick at-100">[\d.]+ (ms|s)</span>', page.text)
    assert "0. " + MODEL in text  # each bar labelled with its step (the API's index) and what it called
    assert "1. calculator" in text


async def test_html_in_a_prompt_is_shown_as_text(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    _, _, run_id = await _run(console, tenant, "<img src=x onerror=alert(1)> hello")
    body = {"model": MODEL, "input": "<script>alert('r')</script> hi"}
    response = await console.post("/v1/responses", json=body, headers=tenant.headers())
    assert response.status_code == 200, response.text

    await sign_in(console, tenant.emails["viewer"])
    page = (await console.get(f"/console/runs/{run_id}")).text
    assert "&lt;img src=x onerror=alert(1)&gt; hello" in page
    assert "<img src=x" not in page
    page = (await console.get(f"/console/runs/{response.json()['id']}")).text
    assert "&lt;script&gt;alert(&#39;r&#39;)&lt;/script&gt; hi" in page
    assert "<script>alert" not in page


async def test_a_response_is_listed_its_trace_opens_and_its_id_finds_it(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant, name="resp-bot", tools=[{"type": "calculator"}])
    body = {"model": MODEL, "prompt": {"id": agent["id"]}, "input": "Use the calculator please: expression=6*7"}
    made = await console.post("/v1/responses", json=body, headers=tenant.headers())
    assert made.status_code == 200, made.text
    response_id = made.json()["id"]
    plain = await console.post("/v1/responses", json={"model": MODEL, "input": "Hi"}, headers=tenant.headers())
    assert plain.status_code == 200, plain.text

    await sign_in(console, tenant.emails["viewer"])
    listed = await console.get("/console/runs")
    assert f'href="/console/runs/{response_id}"' in listed.text
    every_response = await console.get("/console/runs?kind=responses")
    assert plain.json()["id"] in every_response.text  # no agent ran it: listed with the responses

    found = await console.get(f"/console/runs?q=+{response_id}+")  # pasted with spaces around
    assert found.status_code == 303
    assert found.headers["location"] == f"/console/runs/{response_id}"
    page = await console.get(found.headers["location"])
    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    assert f'Response <code class="trace-id">{response_id}</code>' in text
    assert f'href="/console/agents/{agent["id"]}">resp-bot</a>' in text
    output = text[text.index('id="trace-output"') :]
    assert "mcp call" in output
    assert "calculator" in output
    assert '"expression": "6*7"' in output
    assert '"result": 42' in output
    assert "Use the calculator please" in text[text.index('id="trace-input"') :]
    assert 'class="tick at-0">0 ms</span>' in page.text


async def test_chat_completions_are_listed_and_found_by_id(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}
    completion = await console.post("/v1/chat/completions", json=body, headers=tenant.headers())
    assert completion.status_code == 200, completion.text
    completion_id = completion.json()["id"]
    usage = completion.json()["usage"]

    await sign_in(console, tenant.emails["viewer"])
    assert completion_id not in (await console.get("/console/runs")).text  # agent runs by default
    assert completion_id in (await console.get("/console/runs?kind=chat")).text
    assert completion_id in (await console.get("/console/runs?kind=all")).text
    found = await console.get(f"/console/runs?q={completion_id}")
    assert found.headers["location"] == f"/console/runs/{completion_id}"
    page = await console.get(found.headers["location"])
    assert page.status_code == 200, page.text
    assert f"{usage['prompt_tokens']} in / {usage['completion_tokens']} out" in page.text
    assert MODEL in page.text


async def test_text_completions_are_listed_and_a_cached_prompt_shows_on_its_page(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    prompt = "You are the travel desk's agent. Answer with the itinerary, the fares and the rules. " * 60
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 8, "seed": 1}
    first = await console.post("/v1/completions", json=body, headers=tenant.headers())
    second = await console.post("/v1/completions", json=body, headers=tenant.headers())
    assert second.status_code == 200, second.text
    completion_id, usage = second.json()["id"], second.json()["usage"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    saved = usage["compute"]["cache_saved_chip_us"]
    assert cached > 0  # the repeated prompt was read from the prompt cache
    assert saved > 0

    await sign_in(console, tenant.emails["viewer"])
    listed = (await console.get("/console/runs?kind=chat")).text
    assert completion_id in listed
    assert first.json()["id"] in listed
    assert "text completion" in listed
    page = await console.get(f"/console/runs/{completion_id}")
    assert page.status_code == 200, page.text
    assert f'Text completion <code class="trace-id">{completion_id}</code>' in page.text
    assert (
        f"{usage['prompt_tokens']} in ({cached} from the prompt cache) / {usage['completion_tokens']} out" in page.text
    )
    assert f"(the prompt cache saved {saved:,})" in page.text


async def test_an_unknown_id_is_not_found_and_named(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["viewer"])
    searched = await console.get("/console/runs?q=run_doesnotexist")
    assert searched.status_code == 404
    assert "Not found" in searched.text
    assert "<code>run_doesnotexist</code>" in searched.text
    assert 'value="run_doesnotexist"' in searched.text  # kept in the box, to correct it
    for missing in ("run_doesnotexist", "resp_doesnotexist", "chatcmpl-doesnotexist", "whatever"):
        page = await console.get(f"/console/runs/{missing}")
        assert page.status_code == 404
        assert missing in html.unescape(page.text)


async def test_another_tenant_s_executions_are_not_found(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant, other = await make_console_tenant(), await make_console_tenant()
    _, _, run_id = await _run(console, tenant, "Hello")
    response = await console.post("/v1/responses", json={"model": MODEL, "input": "Hi"}, headers=tenant.headers())
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}
    completion = await console.post("/v1/chat/completions", json=body, headers=tenant.headers())
    ids = [run_id, response.json()["id"], completion.json()["id"]]

    await sign_in(console, tenant.emails["viewer"])
    for execution_id in ids:  # the tenant's own: found
        assert (await console.get(f"/console/runs/{execution_id}")).status_code == 200
    console.cookies.clear()
    await sign_in(console, other.emails["owner"])
    everything = (await console.get("/console/runs?kind=all")).text
    for execution_id in ids:
        assert (await console.get(f"/console/runs/{execution_id}")).status_code == 404
        assert (await console.get(f"/console/runs?q={execution_id}")).status_code == 404
        assert f'href="/console/runs/{execution_id}"' not in everything


async def test_a_workflow_run_shows_its_nodes_and_its_guardrail_verdict(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    helper = await make_agent(console, tenant, name="node-helper")
    nodes = [
        {"type": "guardrail", "id": "check", "guardrails": [{"type": "max_length", "max_chars": 5}],
         "passed": "ask", "tripped": "ask"},
        {"type": "agent", "id": "ask", "agent_id": helper["id"], "next": "done"},
        {"type": "end", "id": "done"},
    ]  # fmt: skip
    made = await console.post(
        "/v1/workflows", json={"name": "triage-flow", "start": "check", "nodes": nodes}, headers=tenant.headers()
    )
    assert made.status_code == 201, made.text
    workflow_id = made.json()["id"]
    created = await console.post(
        "/v1/runs",
        json={"workflow_id": workflow_id, "thread": {"messages": [{"role": "user", "content": "far too long"}]}},
        headers=tenant.headers("developer"),
    )
    assert created.status_code in (200, 201), created.text
    run = created.json()
    await wait_for_run(console, run["thread_id"], run["id"], tenant.headers("developer"), statuses=_ENDED)

    await sign_in(console, tenant.emails["viewer"])
    listed = await console.get("/console/runs")
    assert 'triage-flow v1</a> <span class="hint">(workflow)</span>' in listed.text
    page = await console.get(f"/console/runs/{run['id']}")
    assert page.status_code == 200, page.text
    trail = page.text[page.text.index('id="workflow-trail"') :]
    assert re.search(r"<code>check</code></td><td>guardrail</td><td>tripped", trail)
    assert re.search(r"<code>ask</code></td><td>agent</td>", trail)
    assert 'class="verdict tripped"' in page.text
    assert "workflow node: <code>ask</code>" in page.text  # the agent node's span
    assert f'href="/console/agents/{helper["id"]}">node-helper</a>' in page.text  # the node's agent, by name
    assert f'href="/console/workflows/{workflow_id}">triage-flow</a>' in page.text


async def test_a_trace_shows_a_handoff_between_agents_and_an_approval_asked_then_given(
    console: Any, make_console_tenant: Any
) -> None:
    run_inline(console, model_factory=scripted_model)  # calls the first tool it is offered (call_1), then answers
    tenant = await make_console_tenant()
    headers = tenant.headers("developer")
    specialist = await make_agent(console, tenant, name="billing-desk")
    _, _, handed = await _run(
        console, tenant, "Who handles invoices?", name="front-desk",
        handoffs=[{"agent_id": specialist["id"], "description": "billing questions"}],
    )  # fmt: skip
    tool = {"type": "current_time", "requires_approval": True}
    _, thread_id, asking = await _run(console, tenant, "What time is it?", name="clock", tools=[tool])

    await sign_in(console, tenant.emails["viewer"])
    page = html.unescape((await console.get(f"/console/runs/{handed}")).text)
    handoff = page[page.index('id="step-1"') :]
    assert "handoff: <code>transfer_to_billingdesk</code>" in handoff
    assert re.search(r'class="handoff">\s*<a href="/console/agents/[^"]+">front-desk</a> → billing-desk', handoff)
    assert f'href="/console/agents/{specialist["id"]}">billing-desk</a>' in page  # the step it answered with

    waiting = html.unescape((await console.get(f"/console/runs/{asking}")).text)
    assert "Waiting for the client" in waiting
    assert "approval of <code>current_time</code>" in waiting

    decided = await console.post(
        f"/v1/threads/{thread_id}/runs/{asking}/approvals",
        json={"approvals": [{"tool_call_id": "call_1", "approve": True}]},
        headers=headers,
    )
    assert decided.status_code == 200, decided.text
    await wait_for_run(console, thread_id, asking, headers, statuses=_ENDED - {"requires_action"})
    approved = (await console.get(f"/console/runs/{asking}")).text
    assert re.search(r'<dt>Approval</dt><dd class="approval">approved</dd>', approved)
    assert "Waiting for the client" not in approved
