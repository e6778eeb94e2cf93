"""A workflow as a Python module that runs it with the openai-agents package against this server.

Each agent node asks the agent as the server defines it (``Agent(prompt={"id", "version"})``: its instructions,
tools, handoffs and guardrails run on the server, through the Responses API), at the version the workflow names or
the one it had when exported; the graph (decisions, loops, state, guardrails, approvals) runs in the module, with the
same interpreter the server uses (``switchyard.agents.workflows``), so the two cannot disagree about what a node does.
Tool nodes call the workflow's tools in the module: built-in and MCP tools as the server builds them (MCP headers,
sealed on the server, are not exported), a client's ``function`` tools through the ``FUNCTIONS`` the module's reader
fills in. Every value from the tenant enters the module as a Python string literal (``repr``), never as code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from switchyard.agents import AgentSpec
from switchyard.agents.workflows import WorkflowSpec

__all__ = ["agents_sdk_module"]

_TEMPLATE = '''"""{name}: workflow {workflow_id}, version {version}, exported from Switchyard to run with openai-agents.

Each agent node asks the agent as the server defines it (its instructions, tools, handoffs and guardrails run there);
the graph (decisions, loops, state, guardrails, approvals) runs here, with the interpreter the server uses. Tool nodes
call the workflow's tools here: built-in and MCP ones as the server builds them (add an MCP server's headers to
TOOLS: they are not exported), your function tools through FUNCTIONS.

    pip install openai-agents switchyard-agents
    SWITCHYARD_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=<a Switchyard key> python this_file.py "your input"
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable

import openai
from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled
from switchyard.agents import AgentSpec
from switchyard.agents.tools import ToolContext, ToolKind, build_tools, mcp_tool_name
from switchyard.agents.workflows import AwaitApproval, CallTool, RunAgent, WorkflowSpec, advance, fail
from switchyard.agents.workflows import record_approval, record_output, start

WORKFLOW = WorkflowSpec.model_validate(json.loads({graph}))
AGENTS = {{
{agents}
}}
TOOLS = json.loads({tools})
FUNCTIONS: dict[str, Callable[..., str]] = {{}}  # the workflow's function tools, by name: add yours


async def call_tool(action: CallTool, approve: Callable[[str], bool]) -> tuple[str, bool]:
    """The output of a tool node's call, and whether it is an error."""
    if action.server_label is None and action.tool in FUNCTIONS:
        return str(FUNCTIONS[action.tool](**action.arguments)), False
    registry = await build_tools(AgentSpec(name=WORKFLOW.name, model="-", tools=TOOLS))
    name = action.tool if action.server_label is None else mcp_tool_name(action.server_label, action.tool)
    tool = registry.get(name)
    if tool is None or tool.kind is ToolKind.FUNCTION:
        raise SystemExit(f"the workflow calls the function tool {{name!r}}: add it to FUNCTIONS")
    if tool.requires_approval and not approve(f"Call {{name}} with {{json.dumps(action.arguments)}}?"):
        return "The tool call was not approved and was not executed.", True
    result = await tool.call(action.arguments, ToolContext(run_id="exported", call_id=action.node))
    return result.output, result.is_error


async def run(text: str, approve: Callable[[str], bool]) -> str:
    """The workflow's output for ``text``; ``approve`` answers its approvals."""
    state = start(WORKFLOW, text)
    while True:
        state, action = advance(WORKFLOW, state)
        if isinstance(action, RunAgent):
            result = await Runner.run(AGENTS[action.node], action.input)
            state = record_output(WORKFLOW, state, action.node, str(result.final_output))
        elif isinstance(action, CallTool):
            output, failed = await call_tool(action, approve)
            if failed:
                state = fail(state, "tool_error", f"node {{action.node!r}}: {{output}}")
            else:
                state = record_output(WORKFLOW, state, action.node, output)
        elif isinstance(action, AwaitApproval):
            state = record_approval(WORKFLOW, state, action.node, approve(action.message))
        elif action.status == "completed":
            return action.output or ""
        else:
            raise SystemExit(f"the workflow failed: {{state.error}}")


def ask_a_person(message: str) -> bool:
    return input(f"{{message}}\\nApprove? [y/N] ").strip().lower() in ("y", "yes")


if __name__ == "__main__":
    base_url = os.environ.get("SWITCHYARD_BASE_URL", "http://127.0.0.1:8000/v1")
    set_default_openai_client(openai.AsyncOpenAI(base_url=base_url), use_for_tracing=False)
    set_tracing_disabled(True)
    print(asyncio.run(run(" ".join(sys.argv[1:]), ask_a_person)))
'''


def agents_sdk_module(
    workflow_id: str, version: int, spec: AgentSpec, agents: Mapping[str, tuple[int, AgentSpec]]
) -> str:
    """The module for the workflow ``spec`` (``workflow_id`` at ``version``); ``agents`` holds, by node id, the
    version and spec of the agent each agent node asks."""
    graph = spec.workflow
    assert graph is not None
    lines = [
        f"    {node!r}: Agent(name={spec.name!r}, model={spec.model!r}, "
        f"prompt={{'id': {_agent_id(graph, node)!r}, 'version': {str(agent_version)!r}}}),"
        for node, (agent_version, spec) in agents.items()
    ]
    text = json.dumps(graph.model_dump(mode="json", by_alias=True), indent=None, sort_keys=True)
    tools = [
        {key: value for key, value in tool.items() if key != "headers"}  # sealed: of no use outside the server
        for tool in spec.model_dump(mode="json")["tools"]
    ]
    return _TEMPLATE.format(
        name=_docstring_safe(graph.name),
        workflow_id=workflow_id,
        version=version,
        graph=repr(text),
        agents="\n".join(lines),
        tools=repr(json.dumps(tools, sort_keys=True)),
    )


def _agent_id(graph: WorkflowSpec, node: str) -> str:
    return next(agent_id for node_id, agent_id, _ in graph.agent_refs() if node_id == node)


def _docstring_safe(text: str) -> str:
    """``text`` for the module's docstring: one line, no quotes or backslashes that could end it."""
    return "".join(c if c.isprintable() and c not in '"\\\\' else " " for c in text)[:200]
