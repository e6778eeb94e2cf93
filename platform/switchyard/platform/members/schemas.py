from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from switchyard.platform.auth.roles import Role
from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.models import Member

__all__ = ["MemberCreate", "MemberDeleted", "MemberPublic", "MemberUpdate"]

# No ASCII control character or space: spelled out, because `\s` differs between regex engines (the server's and
# a client's JSON Schema validator disagree on U+001C-U+001F).
EMAIL_PATTERN = r"^[^@\x00-\x20\x7f]+@[^@\x00-\x20\x7f]+\.[^@\x00-\x20\x7f]+$"


class MemberCreate(BaseModel):
    model_config = REQUEST_BODY

    email: str = Field(
        pattern=EMAIL_PATTERN, max_length=320, description="The member's e-mail address.", examples=["ada@example.com"]
    )
    role: Role = Field(default=Role.DEVELOPER, strict=False, description="The member's role in the tenant.")


class MemberUpdate(BaseModel):
    """Fields to change; absent fields stay as they are."""

    model_config = REQUEST_BODY

    role: Role = Field(strict=False, description="The new role.", examples=["viewer"])


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
