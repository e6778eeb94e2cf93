"""The agents one run may act as: its own agent, those it may hand off to (``AgentSpec.handoffs``) and those it
calls as tools (``AgentToolSpec``).

The platform resolves the agents a spec names (``Member``: a version's spec, its tools, its model's window) and
gives them to :class:`~switchyard.agents.loop.RunLoop`. A handoff is a tool call the model makes,
``transfer_to_<name>`` as the Agents SDK names it, after which the run goes on as the target agent (its
instructions, tools and model) on the same messages. An agent tool's call runs the agent on a context of its own
(its ``input`` as the user's message) and its final answer is the call's output, as the Agents SDK's
``Agent.as_tool`` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from switchyard.agents.spec import AgentSpec, AgentToolSpec, HandoffSpec
from switchyard.agents.tools.base import RetrySemantics, ToolContext, ToolDefinition, ToolKind, ToolRegistry, ToolResult

__all__ = ["AgentTool", "HandoffTool", "Member", "agent_tool_name", "handoff_output", "handoff_tool_name", "snake_name"]


def snake_name(name: str) -> str:
    """An agent's name as a tool-name part, as the Agents SDK writes it (``"Billing Agent"`` → ``billing_agent``)."""
    return re.sub(r"[^a-z0-9_]", "", re.sub(r"\s+", "_", name.strip().lower()))[:48] or "agent"


def handoff_tool_name(agent_name: str) -> str:
    return f"transfer_to_{snake_name(agent_name)}"


def handoff_output(agent_name: str) -> str:
    """The output of a handoff's tool call, as the Agents SDK records it."""
    return json.dumps({"assistant": agent_name})


@dataclass(frozen=True)
class Member:
    """An agent a run may act as: ``agent_id`` at ``version``, its spec, its tools (handoffs included) and the
    context window of its model."""

    agent_id: str
    version: int
    spec: AgentSpec
    tools: ToolRegistry
    context_window_tokens: int


@dataclass(frozen=True)
class HandoffTool:
    """The ``transfer_to_<name>`` tool: the run loop performs it (the run goes on as ``target``); never called."""

    target: str
    definition: ToolDefinition
    kind: ToolKind = ToolKind.HANDOFF
    requires_approval: bool = False

    @classmethod
    def to(cls, handoff: HandoffSpec, target_name: str) -> HandoffTool:
        description = f"Handoff to the {target_name} agent to handle the request. {handoff.description}".strip()
        parameters: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
        return cls(handoff.agent_id, ToolDefinition(handoff_tool_name(target_name), description, parameters))

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return RetrySemantics.IDEMPOTENT

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        raise AssertionError("a handoff is performed by the run loop, not called")


def agent_tool_name(tool: AgentToolSpec, agent_name: str) -> str:
    return tool.name or snake_name(agent_name)


@dataclass(frozen=True)
class AgentTool:
    """Another agent as a tool: the run loop runs ``target`` on the call's ``input`` (a frame); never called."""

    target: str
    definition: ToolDefinition
    requires_approval: bool = False
    kind: ToolKind = ToolKind.AGENT

    @classmethod
    def of(cls, tool: AgentToolSpec, target_name: str) -> AgentTool:
        parameters: dict[str, Any] = {
            "type": "object",
            "properties": {"input": {"type": "string", "description": f"what to ask the {target_name} agent"}},
            "required": ["input"],
            "additionalProperties": False,
        }
        description = tool.description or f"Ask the {target_name} agent; its answer is the result."
        definition = ToolDefinition(agent_tool_name(tool, target_name), description, parameters)
        return cls(tool.agent_id, definition, tool.requires_approval)

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return RetrySemantics.IDEMPOTENT

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        raise AssertionError("an agent tool is run by the run loop, not called")
