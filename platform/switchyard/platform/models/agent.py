from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["Agent"]


class Agent(TenantOwned, table=True):
    """An agent: a name and a sequence of immutable versions (``agent_versions``); runs pick one version. A
    workflow (``kind``) is stored, versioned and run the same way: its versions' specs hold the graph.

    Deleting an agent hides it (``deleted_at``); its versions stay, because runs refer to them.
    """

    __tablename__ = "agents"

    id: str = Field(primary_key=True, max_length=40)
    name: str = Field(max_length=256)
    kind: str = Field(default="agent", max_length=16, description="agent | workflow")
    latest_version: int = Field(default=1, description="The version new runs use unless they name another.")
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    deleted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
