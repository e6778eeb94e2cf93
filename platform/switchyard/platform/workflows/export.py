"""A workflow as a Python module that runs it with the openai-agents package against this server.

Each agent node asks the agent as the server defines it (``Agent(prompt={"id", "version"})``: its instructions,
tools, handoffs and guardrails run on the server, through the Responses API), at the version the workflow names or
the one it had when exported; the graph (decisions, loops, state, approvals) runs in the module, with the same
interpreter the server uses (``switchyard.agents.workflows``), so the two cannot disagree about what a node does.
Every value from the tenant enters the module as a Python string literal (``repr``), never as code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from switchyard.agents import AgentSpec
from switchyard.agents.workflows import WorkflowSpec

__all__ = ["agents_sdk_module"]

_TEMPLATE = '''"""{name}: workflow {workflow_id}, version {version}, exported from Switchyard to run with openai-agents.

Each agent node asks the agent as the server defines it (its instructions, tools, handoffs and guardrails run there);
the graph (decisions, loops, state, approvals) runs here, with the interpreter the server uses.

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
from switchyard.agents.workflows import AwaitApproval, RunAgent, WorkflowSpec, advance, record_output
from switchyard.agents.workflows import record_approval, start

WORKFLOW = WorkflowSpec.model_validate(json.loads({graph}))
AGENTS = {{
{agents}
}}


async def run(text: str, approve: Callable[[str], bool]) -> str:
    """The workflow's output for ``text``; ``approve`` answers its approvals."""
    state = start(WORKFLOW, text)
    while True:
        state, action = advance(WORKFLOW, state)
        if isinstance(action, RunAgent):
            result = await Runner.run(AGENTS[action.node], action.input)
            state = record_output(WORKFLOW, state, action.node, str(result.final_output))
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
    workflow_id: str, version: int, graph: WorkflowSpec, agents: Mapping[str, tuple[int, AgentSpec]]
) -> str:
    """The module for ``graph`` (``workflow_id`` at ``version``); ``agents`` holds, by node id, the version and spec
    of the agent each agent node asks."""
    lines = [
        f"    {node!r}: Agent(name={spec.name!r}, model={spec.model!r}, "
        f"prompt={{'id': {_agent_id(graph, node)!r}, 'version': {str(agent_version)!r}}}),"
        for node, (agent_version, spec) in agents.items()
    ]
    text = json.dumps(graph.model_dump(mode="json", by_alias=True), indent=None, sort_keys=True)
    return _TEMPLATE.format(
        name=_docstring_safe(graph.name),
        workflow_id=workflow_id,
        version=version,
        graph=repr(text),
        agents="\n".join(lines),
    )


def _agent_id(graph: WorkflowSpec, node: str) -> str:
    return next(agent_id for node_id, agent_id, _ in graph.agent_refs() if node_id == node)


def _docstring_safe(text: str) -> str:
    """``text`` for the module's docstring: one line, no quotes or backslashes that could end it."""
    return "".join(c if c.isprintable() and c not in '"\\\\' else " " for c in text)[:200]
