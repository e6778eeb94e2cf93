"""The agents an agent may hand off to, and those they may hand off to in turn: checked when a version is saved,
loaded (and their versions fixed) when a run starts."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.agents import AgentSpec
from switchyard.platform.agent_registry.versions import get_version
from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import InvalidRequest, NotFound

__all__ = ["MAX_TEAM", "TeamError", "check_handoffs", "load_team"]

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
    """Every agent reachable from ``spec`` through handoffs, by id: the version ``pinned`` fixed, else the one the
    handoff names, else the latest. Raises :class:`TeamError`."""
    team: dict[str, tuple[int, AgentSpec]] = {}
    pending = [(h.agent_id, h.version) for h in spec.handoffs]
    while pending:
        agent_id, version = pending.pop(0)
        if agent_id in team:
            continue
        if len(team) + 1 >= MAX_TEAM:
            raise TeamError("too_many_agents", f"a run may act as at most {MAX_TEAM} agents (its handoffs, nested)")
        try:
            _, row = await get_version(session, scope=scope, agent_id=agent_id, version=pinned.get(agent_id, version))
        except NotFound as exc:
            raise TeamError("agent_not_found", f"handoff target: {exc.message}") from None
        member = AgentSpec.model_validate(row.definition)
        team[agent_id] = (row.version, member)
        pending.extend((h.agent_id, h.version) for h in member.handoffs)
    return team


async def check_handoffs(session: AsyncSession, scope: TenantScope, spec: AgentSpec) -> None:
    """Refuse (400) a spec whose handoffs name an agent (or version) the tenant does not have, or too many."""
    for index, handoff in enumerate(spec.handoffs):
        try:
            await get_version(session, scope=scope, agent_id=handoff.agent_id, version=handoff.version)
        except NotFound as exc:
            raise InvalidRequest(exc.message, param=f"handoffs[{index}]", code="agent_not_found") from None
    try:
        await load_team(session, scope, spec, {})
    except TeamError as exc:
        raise InvalidRequest(exc.message, param="handoffs", code=exc.code) from None
