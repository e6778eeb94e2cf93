"""End to end: an agent with a function tool, an ``http_request`` tool and an MCP tool, run with streaming.

The tools reach real servers on 127.0.0.1 through the SSRF guard (a resolver mapping test names to 127.0.0.1
and the loopback allowance, both given to this test's inline executor only). The model is scripted so the
run uses each tool once: ``http_request``, then the MCP tool, then the function tool (answered by the client
through ``submit_tool_outputs``), then the final answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from switchyard.agents import FunctionModel, Message, ModelRequest, StaticResolver, ToolCall
from tests.platform.agents_api.factories import make_agent, run_inline
from tests.platform.agents_api.test_agents_api import parse_sse
from tests.support.mcp import mcp_http_app
from tests.support.served import port_of, served

RESOLVER = {"mcp.test": ["127.0.0.1"], "api.test": ["127.0.0.1"]}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        body = b'{"weather": "sunny"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def mcp_port() -> Iterator[int]:
    from mcp.server.mcpserver import MCPServer

    mcp = MCPServer("switchyard-e2e")

    @mcp.tool()
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value-of-{key}"

    app = mcp_http_app(mcp)
    with served(app) as url:
        yield port_of(url)


def _script(http_port: int) -> Any:
    calls = [
        ToolCall(id="c_http", name="http_request", arguments=json.dumps({"url": f"http://api.test:{http_port}/w"})),
        ToolCall(id="c_mcp", name="kb__lookup", arguments='{"key": "paris"}'),
        ToolCall(id="c_fn", name="ask_user", arguments='{"question": "which day?"}'),
    ]

    def answer(request: ModelRequest) -> Message:
        results = [m for m in request.messages if m.role == "tool"]
        if len(results) < len(calls):
            return Message.assistant(None, [calls[len(results)]])
        return Message.assistant("Done: " + " | ".join(str(m.content) for m in results))

    return lambda _tenant, _thread: FunctionModel(answer, chip_us_per_token=7)


async def test_three_kinds_of_tools_streamed(client: Any, make_tenant: Any, http_port: int, mcp_port: int) -> None:
    run_inline(client, model_factory=_script(http_port), resolver=StaticResolver(RESOLVER), allow_loopback=True)
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(
        client,
        tenant,
        tools=[
            {
                "type": "function",
                "name": "ask_user",
                "parameters": {"type": "object", "properties": {"question": {"type": "string"}}},
            },
            {"type": "http_request", "allowed_hosts": ["api.test"], "allowed_ports": [http_port]},
            {"type": "mcp", "server_label": "kb", "server_url": f"http://mcp.test:{mcp_port}/mcp"},
        ],
    )
    first = await client.post(
        "/v1/runs",
        json={"agent_id": agent["id"], "stream": True, "thread": {"messages": [{"content": "plan my trip"}]}},
        headers=headers,
    )
    assert first.status_code == 200, first.text
    events = parse_sse(first.text)
    assert events[-1]["data"] == "[DONE]"
    waiting = json.loads(events[-2]["data"])
    assert events[-2]["event"] == "thread.run.requires_action"
    assert [c["id"] for c in waiting["required_action"]["tool_calls"]] == ["c_fn"]
    run_id, thread_id = waiting["id"], waiting["thread_id"]

    second = await client.post(
        f"/v1/threads/{thread_id}/runs/{run_id}/submit_tool_outputs",
        json={"tool_outputs": [{"tool_call_id": "c_fn", "output": "Saturday"}], "stream": True},
        headers=headers,
    )
    assert second.status_code == 200, second.text
    more = parse_sse(second.text)
    assert int(more[0]["id"]) == int(events[-2]["id"]) + 1  # the second stream continues the numbering
    assert more[-2]["event"] == "thread.run.completed"
    answer = [json.loads(e["data"]) for e in more if e["event"] == "thread.message.completed"][-1]
    assert answer["content"].startswith("Done: ")
    assert '"weather": "sunny"' in answer["content"] or "sunny" in answer["content"]
    assert "value-of-paris" in answer["content"]
    assert "Saturday" in answer["content"]

    steps = (await client.get(f"/v1/threads/{thread_id}/runs/{run_id}/steps?order=asc", headers=headers)).json()
    kinds = [(s["type"], (s["step_details"].get("tool_call") or {}).get("id")) for s in steps["data"]]
    assert kinds == [
        ("model_call", None),
        ("tool_call", "c_http"),
        ("model_call", None),
        ("tool_call", "c_mcp"),
        ("model_call", None),
        ("tool_call", "c_fn"),
        ("model_call", None),
    ]
    tool_kinds = [s["step_details"]["tool_kind"] for s in steps["data"] if s["type"] == "tool_call"]
    assert tool_kinds == ["builtin", "mcp", "function"]
    model_steps = [s for s in steps["data"] if s["type"] == "model_call"]
    assert all(s["step_details"]["chip_us"] > 0 for s in model_steps)
    assert all(s["duration_ms"] is not None for s in steps["data"])
    run = (await client.get(f"/v1/threads/{thread_id}/runs/{run_id}", headers=headers)).json()
    assert run["status"] == "completed"
    assert run["chip_us"] == sum(s["step_details"]["chip_us"] for s in model_steps)
