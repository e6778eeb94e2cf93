"""The agents a job acts as, resolved for one drive: its own agent (model backend and tools) and those it may hand
off to or call as tools, each with theirs. Resolved at every drive, from the versions the job fixed when it first
started."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from switchyard.accelerator.pool import Backend
from switchyard.agents import AgentSpec, AgentToolSpec, RunState, ToolKind, ToolRegistry, build_tools
from switchyard.agents.team import AgentTool, HandoffTool, Member
from switchyard.agents.tools import FileSearcher
from switchyard.platform.admission import ModelNotFound, model_backend
from switchyard.platform.agent_registry.team import TeamError, load_team, named_agents
from switchyard.platform.db import TenantScope
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.knowledge.search.tool import file_searcher
from switchyard.platform.observability.instrument import traced_tools

__all__ = ["Cast", "CastError", "resolve_cast"]


class CastError(Exception):
    """The job cannot be driven as its agents stand: ``code`` and ``message`` fail it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Cast:
    """The job's own agent (``spec`` with its served model name, ``backend``, ``tools``) and its ``members``."""

    spec: AgentSpec
    backend: Backend
    tools: ToolRegistry
    members: Mapping[str, Member] = field(default_factory=dict)
    backends: Mapping[str, Backend] = field(default_factory=dict)
    """Each member's backend, by agent id."""

    def kind_of(self, name: str) -> ToolKind | None:
        """The kind of the tool called ``name``, whichever agent offers it."""
        for tools in (self.tools, *(m.tools for m in self.members.values())):
            tool = tools.get(name)
            if tool is not None:
                return tool.kind
        return None

    def instance_types(self) -> dict[str, str]:
        """The instance type serving each model the job may call, by served model name."""
        backends = [self.backend, *self.backends.values()]
        return {backend.name: backend.spec.instance for backend in backends}


async def resolve_cast(
    env: RunEnvironment, scope: TenantScope, spec: AgentSpec, state: RunState, *, api_key_id: str | None = None
) -> Cast:
    """Resolve the job's agents; the versions of those it may hand off to are fixed in ``state.agents`` (the first
    checkpoint stores them); their ``file_search`` tools search on behalf of ``api_key_id``. Raises
    :class:`CastError`."""
    searcher = file_searcher(
        database=env.database, pool=env.pool, admission=env.admission, scope=scope, api_key_id=api_key_id
    )
    spec, backend = _served(env, scope, spec)
    team: dict[str, tuple[int, AgentSpec]] = {}
    if named_agents(spec):
        async with env.database.unit_of_work(scope) as session:
            try:
                team = await load_team(session, scope, spec, state.agents)
            except TeamError as exc:
                raise CastError(exc.code, exc.message) from None
    state.agents = {agent_id: version for agent_id, (version, _) in team.items()}
    names = {agent_id: member.name for agent_id, (_, member) in team.items()}
    members: dict[str, Member] = {}
    backends: dict[str, Backend] = {}
    for agent_id, (version, member_spec) in team.items():
        member_spec, backends[agent_id] = _served(env, scope, member_spec)
        tools = await _tools(env, member_spec, names, searcher)
        members[agent_id] = Member(agent_id, version, member_spec, tools, backends[agent_id].context_window)
    return Cast(spec, backend, await _tools(env, spec, names, searcher), members, backends)


def _served(env: RunEnvironment, scope: TenantScope, spec: AgentSpec) -> tuple[AgentSpec, Backend]:
    try:
        backend = model_backend(env.pool, spec.model, scope.tenant_id)
    except ModelNotFound as exc:
        raise CastError("model_not_found", exc.message) from None
    # an alias is billed under the served name, as chat completions bill it: one model in the books
    return spec.model_copy(update={"model": backend.name}), backend


async def _tools(
    env: RunEnvironment, spec: AgentSpec, names: Mapping[str, str], searcher: FileSearcher
) -> ToolRegistry:
    try:  # an MCP server that cannot be listed fails the job, with the reason
        tools = traced_tools(await build_tools(spec, file_searcher=searcher, **env.tool_options))
        for handoff in spec.handoffs:
            tools.add(HandoffTool.to(handoff, names[handoff.agent_id]))
        for tool in spec.tools:
            if isinstance(tool, AgentToolSpec):
                tools.add(AgentTool.of(tool, names[tool.agent_id]))
    except Exception as exc:
        raise CastError("tool_setup_error", f"{type(exc).__name__}: {exc}") from None
    return tools
