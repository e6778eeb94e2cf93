"""The agents an agent may hand off to or call as tools, and theirs in turn: checked when a version is saved,
loaded (and their versions fixed) when a run starts."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.agents import AgentGuardrail, AgentSpec, AgentToolSpec, McpToolSpec
from switchyard.agents.team import agent_tool_name
from switchyard.platform.agent_registry.versions import get_version
from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import InvalidRequest, NotFound

__all__ = ["MAX_TEAM", "TeamError", "check_team", "load_team", "named_agents", "named_version"]

MAX_TEAM = 16
"""The most agents one run may act as, its own included."""


class TeamError(Exception):
    """An agent the spec names cannot be used: ``code`` (``agent_not_found``, ``too_many_agents``) and why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def load_team(
    session: AsyncSession, scope: TenantScope, spec: AgentSpec, pinned: Mapping[str, int]
) -> dict[str, tuple[int, AgentSpec]]:
    """Every agent reachable from ``spec`` through handoffs and agent tools, by id: the version ``pinned`` fixed,
    else the one the handoff or tool names, else the latest. Raises :class:`TeamError`."""
    team: dict[str, tuple[int, AgentSpec]] = {}
    pending = named_agents(spec)
    while pending:
        agent_id, version = pending.pop(0)
        if agent_id in team:
            continue
        if len(team) + 1 >= MAX_TEAM:
            raise TeamError("too_many_agents", f"a run may act as at most {MAX_TEAM} agents (its handoffs, nested)")
        try:
            _, row = await get_version(session, scope=scope, agent_id=agent_id, version=pinned.get(agent_id, version))
        except NotFound as exc:
            raise TeamError("agent_not_found", f"an agent it hands off to or calls: {exc.message}") from None
        member = AgentSpec.model_validate(row.definition)
        team[agent_id] = (row.version, member)
        pending.extend(named_agents(member))
    return team


def named_agents(spec: AgentSpec) -> list[tuple[str, int | None]]:
    """The agents ``spec`` hands off to, calls as tools, has judge as guardrails or runs as a workflow's nodes, with
    the version each names (``None``: the latest)."""
    tools = [(t.agent_id, t.version) for t in spec.tools if isinstance(t, AgentToolSpec)]
    checks = [*spec.guardrails.input, *spec.guardrails.output]
    judges = [(g.agent_id, g.version) for g in checks if isinstance(g, AgentGuardrail)]
    nodes = [(agent_id, version) for _, agent_id, version in spec.workflow.agent_refs()] if spec.workflow else []
    return [*((h.agent_id, h.version) for h in spec.handoffs), *tools, *judges, *nodes]


async def check_team(session: AsyncSession, scope: TenantScope, spec: AgentSpec) -> None:
    """Refuse a spec whose handoffs, agent tools or agent guardrails name an agent (or version) the tenant does not
    have (404), whose agent tools' names clash with its other tools, or that reaches too many agents (400)."""
    for index, handoff in enumerate(spec.handoffs):
        await named_version(session, scope, handoff.agent_id, handoff.version, f"handoffs[{index}]")
    for where, checks in (("input", spec.guardrails.input), ("output", spec.guardrails.output)):
        for index, check in enumerate(checks):
            if isinstance(check, AgentGuardrail):
                await named_version(session, scope, check.agent_id, check.version, f"guardrails.{where}[{index}]")
    names = {tool.name for tool in spec.tools if not isinstance(tool, AgentToolSpec | McpToolSpec)}
    for index, tool in enumerate(spec.tools):
        if isinstance(tool, AgentToolSpec):
            agent = await named_version(session, scope, tool.agent_id, tool.version, f"tools[{index}]")
            name = agent_tool_name(tool, agent.name)
            if name in names:
                message = f"duplicate tool name {name!r} (give the agent tool a name)"
                raise InvalidRequest(message, param=f"tools[{index}].name", code="invalid_value")
            names.add(name)
    try:
        await load_team(session, scope, spec, {})
    except TeamError as exc:
        raise InvalidRequest(exc.message, param="handoffs", code=exc.code) from None


async def named_version(
    session: AsyncSession, scope: TenantScope, agent_id: str, version: int | None, param: str
) -> AgentSpec:
    """The spec of ``agent_id`` at ``version`` (default its latest); 404 ``agent_not_found`` naming ``param`` (as a
    run naming another tenant's agent gets)."""
    try:
        _, row = await get_version(session, scope=scope, agent_id=agent_id, version=version)
    except NotFound as exc:
        raise NotFound(exc.message, param=param, code="agent_not_found") from None
    return AgentSpec.model_validate(row.definition)
