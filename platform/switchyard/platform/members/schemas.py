from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from switchyard.platform.auth.roles import Role
from switchyard.platform.models import Member

__all__ = ["MemberCreate", "MemberDeleted", "MemberPublic", "MemberUpdate"]

EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"


class MemberCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: str = Field(
        pattern=EMAIL_PATTERN, max_length=320, description="The member's e-mail address.", examples=["ada@example.com"]
    )
    role: Role = Field(default=Role.DEVELOPER, description="The member's role in the tenant.")


class MemberUpdate(BaseModel):
    """Fields to change; absent fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    role: Role = Field(description="The new role.", examples=["viewer"])


class MemberPublic(BaseModel):
    object: Literal["member"] = "member"
    id: str
    email: str
    role: Role
    created_at: datetime

    @classmethod
    def of(cls, row: Member) -> MemberPublic:
        return cls(id=row.id, email=row.email, role=Role(row.role), created_at=row.created_at)


class MemberDeleted(BaseModel):
    object: Literal["member.deleted"] = "member.deleted"
    id: str
    deleted: bool = True
