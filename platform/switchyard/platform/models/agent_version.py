from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["AgentVersion"]


class AgentVersion(TenantOwned, table=True):
    """One immutable definition of an agent (a validated ``switchyard.agents.AgentSpec`` as JSON)."""

    __tablename__ = "agent_versions"
    __table_args__ = (UniqueConstraint("agent_id", "version", name="uq_agent_versions_agent_version"),)

    id: str = Field(primary_key=True, max_length=40)
    agent_id: str = Field(foreign_key="agents.id", index=True, max_length=40)
    version: int = Field(description="1, 2, 3, ... per agent")
    definition: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
