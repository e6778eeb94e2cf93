from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from switchyard.platform.auth.roles import Role
from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.http.timestamps import UtcDatetime
from switchyard.platform.models import ApiKey

__all__ = ["ApiKeyCreate", "ApiKeyCreated", "ApiKeyPublic"]


class ApiKeyCreate(BaseModel):
    """A new key for the caller's tenant; its role cannot exceed the caller's."""

    model_config = REQUEST_BODY

    name: str = Field(default="", max_length=200, description="A label to recognise the key by.")
    role: Role = Field(default=Role.DEVELOPER, strict=False, description="What the key may do.")
    expires_at: UtcDatetime | None = Field(
        default=None,
        strict=False,
        description="When the key stops working: a future time with its timezone (`2030-01-01T00:00:00Z`), "
        "before 9999-01-01.",
    )


class ApiKeyPublic(BaseModel):
    """A key as listed: never its secret."""

    object: Literal["api_key"] = "api_key"
    id: str
    name: str
    role: Role
    redacted_value: str = Field(description="The key's public part, e.g. `sy_1a2b3c4d5e6f_…`.")
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None = Field(
        description="When the key last authenticated a request, to the minute (written at most once a minute); "
        "null if it never has."
    )

    @classmethod
    def of(cls, row: ApiKey) -> ApiKeyPublic:
        return cls(
            id=row.id,
            name=row.name,
            role=Role(row.role),
            redacted_value=f"sy_{row.short_id}_…",
            created_at=row.created_at,
            expires_at=row.expires_at,
            revoked_at=row.revoked_at,
            last_used_at=row.last_used_at,
        )


class ApiKeyCreated(ApiKeyPublic):
    """A key just created: ``value`` is shown this once and cannot be retrieved again."""

    value: str
