"""The playground over HTTP: a run's events streamed to the page (executed in-process on the app's simulated fleet,
or on a scripted model with fixed tool-call ids), multi-turn threads, decisions on pending tool calls, and the
roles and tenancy of every route."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from switchyard.agents import FunctionModel, Message, ModelRequest, ToolCall
from switchyard.platform.console.queries import thread_of_run
from switchyard.platform.db import TenantScope
from tests.platform.agents_api.factories import make_agent, run_inline, scripted_model, wait_for_run
from tests.platform.console.factories import ConsoleTenant, page_csrf, sign_in

_RUN_PAGE = re.compile(r"^/console/playground/(run_\w+)$")


def _events(body: str) -> list[tuple[str, Any]]:
    """``(event name, data)`` of each server-sent event (``data`` as JSON, or the text ``[DONE]``)."""
    found = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "event" in fields:
            data = fields["data"]
            found.append((fields["event"], data if data == "[DONE]" else json.loads(data)))
    return found


async def _signed_in(console: Any, tenant: ConsoleTenant, role: str) -> str:
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails[role])).status_code == 303
    return await page_csrf(console, "/console/")


async def _send(console: Any, csrf: str, agent_id: str, message: str, *, after_run: str | None = None) -> str:
    """Send a message from the playground's form (a new chat, or the next message after ``after_run``); the run's
    id from the page it leads to."""
    path = "/console/playground" + (f"/{after_run}/messages" if after_run else "")
    sent = await console.post(path, data={"agent_id": agent_id, "message": message, "csrf_token": csrf})
    assert sent.status_code == 303, sent.text
    found = _RUN_PAGE.match(sent.headers["location"])
    assert found, sent.headers["location"]
    return found.group(1)


async def _thread_of(console: Any, tenant: ConsoleTenant, run_id: str) -> str:
    async with console.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        thread_id = await thread_of_run(session, scope=TenantScope(tenant.id), run_id=run_id)
    assert thread_id is not None
    return thread_id


async def test_the_stream_relays_the_run_s_events_with_each_model_call_s_ttft_and_replica(
    console: Any, make_console_tenant: Any
) -> None:
    run_inline(console)  # the app's own simulated fleet: its receipts carry TTFT and the replica
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant, tools=[{"type": "calculator"}])
    csrf = await _signed_in(console, tenant, "developer")
    run_id = await _send(console, csrf, agent["id"], "Use the calculator please: expression=6*7")

    streamed = await console.get(f"/console/playground/{run_id}/events")  # live until the run ends
    assert streamed.status_code == 200, streamed.text
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert "script-src 'self'" in streamed.headers["content-security-policy"]
    events = _events(streamed.text)
    names = [name for name, _ in events]
    assert names[0] == "thread.run.created"
    assert names[-2:] == ["thread.run.completed", "done"]
    assert "thread.message.delta" in names  # the answer's text, in pieces, before its message is complete
    assert names.index("thread.message.delta") < names.index("thread.run.completed")
    numbers = [data["sequence_number"] for _, data in events[:-1]]
    assert numbers == sorted(set(numbers))
    tool_steps = [d for n, d in events if n == "thread.run.step.completed" and d["type"] == "tool_call"]
    assert [(s["tool_call"]["name"], s["output"]) for s in tool_steps] == [("calculator", '{"result": 42}')]
    model_calls = [d for n, d in events if n == "thread.run.step.completed" and d["type"] == "model_call"]
    assert len(model_calls) == 2
    for call in model_calls:
        assert call["ttft_ms"] > 0
        assert call["replica"].startswith(f"{agent['model']}/")
        assert call["chip_us"] > 0

    after = numbers[4]  # resuming after an event replays only what follows it
    resumed = _events((await console.get(f"/console/playground/{run_id}/events?starting_after={after}")).text)
    assert [d["sequence_number"] for _, d in resumed[:-1]] == numbers[5:]

    page = await console.get(f"/console/playground/{run_id}")
    assert page.status_code == 200
    assert 'id="run-status">completed<' in page.text
    assert "data-stream" not in page.text  # an ended run is not streamed
    for call in model_calls:  # the answer's compute: each model call's chip-µs, TTFT and replica
        assert f"<code>{call['replica']}</code>" in page.text
        assert f'class="ttft">{call["ttft_ms"]:.1f}<' in page.text
        assert f'class="chip-us">{call["chip_us"]:,}<' in page.text
    trace = await console.get(f"/console/runs/{run_id}")  # the run's trace shows them as well
    assert f"<code>{model_calls[0]['replica']}</code>" in trace.text


def _slow_model(_tenant_id: str, _thread_id: str) -> Any:
    """Answers after a second: long enough to see the run's page while the run goes on."""

    async def answer(_request: ModelRequest) -> str:
        await asyncio.sleep(1.0)
        return "Hello, slowly."

    return FunctionModel(answer)


async def test_a_running_run_s_page_streams_from_its_last_event_and_refreshes_itself_without_javascript(
    console: Any, make_console_tenant: Any
) -> None:
    run_inline(console, model_factory=_slow_model)
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant)
    csrf = await _signed_in(console, tenant, "developer")
    run_id = await _send(console, csrf, agent["id"], "Hi")
    page = await console.get(f"/console/playground/{run_id}")
    assert re.search(r'id="run-status">(queued|in_progress)<', page.text)
    after = re.search(rf'data-stream="/console/playground/{run_id}/events\?starting_after=(\d+)"', page.text)
    assert after
    assert int(after.group(1)) >= 2  # created and queued at least are on the page already
    assert f'data-result="/console/playground/{run_id}/result"' in page.text
    assert '<noscript><meta http-equiv="refresh" content="1"></noscript>' in page.text
    streamed = _events((await console.get(f"/console/playground/{run_id}/events?starting_after={after.group(1)}")).text)
    assert streamed[0][1]["sequence_number"] == int(after.group(1)) + 1  # what followed the page, live
    assert streamed[-2:] == [("thread.run.completed", streamed[-2][1]), ("done", "[DONE]")]
    fragment = await console.get(f"/console/playground/{run_id}/result")
    assert fragment.text.lstrip().startswith('<section id="result"')  # no page around it: swapped into the page
    assert 'id="run-status">completed<' in fragment.text
    assert "Hello, slowly." in fragment.text
    assert "data-stream" not in fragment.text


async def test_the_next_message_continues_the_thread_with_a_new_run(console: Any, make_console_tenant: Any) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    agent = await make_agent(console, tenant)
    csrf = await _signed_in(console, tenant, "developer")
    first = await _send(console, csrf, agent["id"], "Tell me about chip-hours.")
    thread_id = await _thread_of(console, tenant, first)
    await wait_for_run(console, thread_id, first, tenant.headers(), statuses={"completed"})
    second = await _send(console, csrf, agent["id"], "And about TTFT?", after_run=first)
    assert second != first
    await wait_for_run(console, thread_id, second, tenant.headers(), statuses={"completed"})
    listed = await console.get(f"/v1/threads/{thread_id}/messages?order=asc", headers=tenant.headers())
    messages = listed.json()["data"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    page = await console.get(f"/console/playground/{second}")
    assert "Tell me about chip-hours." in page.text  # the whole conversation
    assert "And about TTFT?" in page.text
    assert f'action="/console/playground/{second}/messages"' in page.text  # and the next message continues it
    assert 'href="/console/playground">New chat<' in page.text
    fresh = await page_csrf(console, "/console/playground")
    third = await _send(console, fresh, agent["id"], "A new topic.")
    assert await _thread_of(console, tenant, third) != thread_id  # a new chat is a new thread


async def _pending(console: Any, tenant: ConsoleTenant, csrf: str) -> tuple[str, str]:
    """A run of an agent whose function tool needs approval, waiting for it (the scripted model calls ``call_1``)."""
    agent = await make_agent(console, tenant, tools=[{"type": "function", "name": "lookup", "requires_approval": True}])
    run_id = await _send(console, csrf, agent["id"], "Look it up.")
    thread_id = await _thread_of(console, tenant, run_id)
    await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"requires_action"})
    return run_id, thread_id


async def test_approve_then_give_the_function_s_output_and_the_run_completes(
    console: Any, make_console_tenant: Any
) -> None:
    run_inline(console, model_factory=scripted_model)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "developer")
    run_id, thread_id = await _pending(console, tenant, csrf)
    streamed = _events((await console.get(f"/console/playground/{run_id}/events")).text)
    assert [n for n, _ in streamed][-2:] == ["thread.run.requires_action", "done"]  # the stream stops for a decision
    page = await console.get(f"/console/playground/{run_id}")
    assert "Waiting for your approval" in page.text
    assert '<input type="hidden" name="tool_call_id" value="call_1">' in page.text
    assert 'name="decision" value="approve">Approve<' in page.text
    assert 'value="deny" class="danger">Deny<' in page.text
    assert "data-stream" not in page.text
    assert re.search(r'<textarea id="pg-message"[^>]* disabled', page.text)  # no next message while it waits
    assert "The run waits for your decision above" in page.text

    decided = await console.post(
        f"/console/playground/{run_id}/required_action",
        data={"decision": "approve", "tool_call_id": "call_1", "csrf_token": csrf},
    )
    assert decided.status_code == 303, decided.text
    assert decided.headers["location"] == f"/console/playground/{run_id}"
    run = await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"requires_action"})
    assert run["required_action"]["type"] == "submit_tool_outputs"  # approved: now the client runs the function
    page = await console.get(f"/console/playground/{run_id}")
    assert 'name="output:call_1"' in page.text
    again = await console.post(  # the approval was already given: the run does not wait for one now
        f"/console/playground/{run_id}/required_action",
        data={"decision": "approve", "tool_call_id": "call_1", "csrf_token": csrf},
    )
    assert again.status_code == 409
    given = await console.post(
        f"/console/playground/{run_id}/required_action", data={"output:call_1": "42", "csrf_token": csrf}
    )
    assert given.status_code == 303, given.text
    await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"completed"})
    page = await console.get(f"/console/playground/{run_id}")
    assert "The tool said: 42" in page.text
    audit = (await console.get("/v1/audit-log", headers=tenant.headers())).json()["data"]
    approvals = [e for e in audit if e["action"] == "run.approvals"]
    assert [e["details"]["decisions"] for e in approvals] == [{"call_1": True}]
    assert approvals[0]["actor"] == tenant.member_ids["developer"]  # audited as the member who decided


async def test_deny_and_the_call_is_never_executed(console: Any, make_console_tenant: Any) -> None:
    run_inline(console, model_factory=scripted_model)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "developer")
    run_id, thread_id = await _pending(console, tenant, csrf)
    vague = await console.post(
        f"/console/playground/{run_id}/required_action",
        data={"decision": "maybe", "tool_call_id": "call_1", "csrf_token": csrf},
    )
    assert vague.status_code == 400
    unknown = await console.post(  # a decision on no call at all: refused, not guessed
        f"/console/playground/{run_id}/required_action", data={"decision": "approve", "csrf_token": csrf}
    )
    assert unknown.status_code == 400
    denied = await console.post(
        f"/console/playground/{run_id}/required_action",
        data={"decision": "deny", "tool_call_id": "call_1", "csrf_token": csrf},
    )
    assert denied.status_code == 303, denied.text
    run = await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"completed"})
    assert run["required_action"] is None
    steps = (await console.get(f"/v1/threads/{thread_id}/runs/{run_id}/steps", headers=tenant.headers())).json()
    tool = next(s for s in steps["data"] if s["type"] == "tool_call")
    assert tool["step_details"]["is_error"] is True  # denied: answered with an error, never run


def _two_calls(_tenant_id: str, _thread_id: str) -> Any:
    """Calls each offered tool once (``call_1``, ``call_2``), then answers with what the tools said."""

    def answer(request: ModelRequest) -> Message:
        if request.messages[-1].role == "tool":
            said = sorted(str(m.content) for m in request.messages if m.role == "tool")
            return Message.assistant("The tools said: " + " | ".join(said))
        names = [tool["function"]["name"] for tool in request.tools]
        return Message.assistant(
            None, [ToolCall(id=f"call_{i}", name=n, arguments="{}") for i, n in enumerate(names, 1)]
        )

    return FunctionModel(answer, chip_us_per_token=10)


async def test_each_of_several_pending_calls_is_approved_or_denied_on_its_own(
    console: Any, make_console_tenant: Any
) -> None:
    run_inline(console, model_factory=_two_calls)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "developer")
    tools = [{"type": "function", "name": n, "requires_approval": True} for n in ("lookup", "delete_everything")]
    agent = await make_agent(console, tenant, tools=tools)
    run_id = await _send(console, csrf, agent["id"], "Look it up, then clean up.")
    thread_id = await _thread_of(console, tenant, run_id)
    await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"requires_action"})
    page = await console.get(f"/console/playground/{run_id}")
    for call in ("call_1", "call_2"):  # a choice per call, and the choice for all
        assert f'<input type="radio" name="decision:{call}" value="approve" required> Approve' in page.text
        assert f'<input type="radio" name="decision:{call}" value="deny"> Deny' in page.text
    assert 'name="decision" value="approve" formnovalidate>Approve all<' in page.text

    vague = await console.post(
        f"/console/playground/{run_id}/required_action",
        data={"decision:call_1": "approve", "decision:call_2": "later", "csrf_token": csrf},
    )
    assert vague.status_code == 400
    assert "the decision on call_2 is approve or deny" in vague.text  # names the choice, and decides nothing
    run = await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"requires_action"})
    assert run["required_action"]["type"] == "approval"

    decided = await console.post(
        f"/console/playground/{run_id}/required_action",
        data={"decision:call_1": "approve", "decision:call_2": "deny", "csrf_token": csrf},
    )
    assert decided.status_code == 303, decided.text
    run = await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"requires_action"})
    pending = run["required_action"]["submit_tool_outputs"]["tool_calls"]
    assert [c["id"] for c in pending] == ["call_1"]  # only the approved call waits for its output
    given = await console.post(
        f"/console/playground/{run_id}/required_action", data={"output:call_1": "42", "csrf_token": csrf}
    )
    assert given.status_code == 303, given.text
    await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"completed"})
    steps = (await console.get(f"/v1/threads/{thread_id}/runs/{run_id}/steps", headers=tenant.headers())).json()
    denied = [s for s in steps["data"] if s["type"] == "tool_call" and s["step_details"]["is_error"]]
    assert [s["step_details"]["tool_call"]["id"] for s in denied] == ["call_2"]  # denied: never run
    audit = (await console.get("/v1/audit-log", headers=tenant.headers())).json()["data"]
    (approvals,) = [e for e in audit if e["action"] == "run.approvals"]
    assert approvals["details"]["decisions"] == {"call_1": True, "call_2": False}


async def test_a_viewer_can_watch_but_not_start_or_approve(console: Any, make_console_tenant: Any) -> None:
    run_inline(console, model_factory=scripted_model)
    tenant = await make_console_tenant()
    csrf = await _signed_in(console, tenant, "developer")
    run_id, thread_id = await _pending(console, tenant, csrf)
    agent = await make_agent(console, tenant)
    csrf = await _signed_in(console, tenant, "viewer")
    start = await console.post(
        "/console/playground", data={"agent_id": agent["id"], "message": "x", "csrf_token": csrf}
    )
    assert start.status_code == 403
    approve = await console.post(
        f"/console/playground/{run_id}/required_action",
        data={"decision": "approve", "tool_call_id": "call_1", "csrf_token": csrf},
    )
    assert approve.status_code == 403
    reply = await console.post(
        f"/console/playground/{run_id}/messages", data={"agent_id": agent["id"], "message": "x", "csrf_token": csrf}
    )
    assert reply.status_code == 403
    watched = await console.get(f"/console/playground/{run_id}/events")  # viewers read run events, as in the API
    assert watched.status_code == 200
    run = await wait_for_run(console, thread_id, run_id, tenant.headers(), statuses={"requires_action"})
    assert run["required_action"]["type"] == "approval"  # nothing the viewer sent changed the run


async def test_another_tenant_s_run_is_not_found(console: Any, make_console_tenant: Any) -> None:
    run_inline(console, model_factory=scripted_model)
    mine, theirs = await make_console_tenant(), await make_console_tenant()
    their_csrf = await _signed_in(console, theirs, "developer")
    their_run, their_thread = await _pending(console, theirs, their_csrf)
    csrf = await _signed_in(console, mine, "owner")
    agent = await make_agent(console, mine)
    for path in ("", "/result", "/events"):
        assert (await console.get(f"/console/playground/{their_run}{path}")).status_code == 404, path
    decided = await console.post(
        f"/console/playground/{their_run}/required_action",
        data={"decision": "approve", "tool_call_id": "call_1", "csrf_token": csrf},
    )
    assert decided.status_code == 404
    replied = await console.post(
        f"/console/playground/{their_run}/messages", data={"agent_id": agent["id"], "message": "x", "csrf_token": csrf}
    )
    assert replied.status_code == 404
    run = await wait_for_run(console, their_thread, their_run, theirs.headers(), statuses={"requires_action"})
    assert run["required_action"]["type"] == "approval"
