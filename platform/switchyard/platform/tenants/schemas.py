from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from switchyard.platform.api_keys.schemas import ApiKeyCreated
from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.members.schemas import EMAIL_PATTERN
from switchyard.platform.models import Tenant

__all__ = ["TenantCreate", "TenantCreated", "TenantPublic"]


class TenantCreate(BaseModel):
    model_config = REQUEST_BODY

    name: str = Field(min_length=1, max_length=200, description="The tenant's display name.", examples=["Acme"])
    owner_email: str | None = Field(
        default=None,
        pattern=EMAIL_PATTERN,
        max_length=320,
        description="E-mail of the first owner, if known.",
    )


class TenantPublic(BaseModel):
    object: Literal["tenant"] = "tenant"
    id: str
    name: str
    created_at: datetime

    @classmethod
    def of(cls, row: Tenant) -> TenantPublic:
        return cls(id=row.id, name=row.name, created_at=row.created_at)


class TenantCreated(TenantPublic):
    """A new tenant with its first owner key (shown once)."""

    owner_key: ApiKeyCreated
