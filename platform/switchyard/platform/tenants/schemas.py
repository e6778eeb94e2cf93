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
    suspended_at: datetime | None = Field(
        default=None,
        description="When an operator suspended the tenant: its API keys and console sessions stop working "
        "(within `SWITCHYARD_AUTH_CACHE_SECONDS` for a key just used); null while active.",
    )

    @classmethod
    def of(cls, row: Tenant) -> TenantPublic:
        return cls(id=row.id, name=row.name, created_at=row.created_at, suspended_at=row.suspended_at)


class TenantCreated(TenantPublic):
    """A new tenant with its first owner key and the owner's console invitation link (both shown once)."""

    owner_key: ApiKeyCreated
    owner_email: str = Field(
        default="",
        description="The first owner's e-mail: `owner_email` as given, or a placeholder "
        "(`owner-<tenant id>@switchyard.invalid`) the owner signs in with.",
    )
    owner_invitation_url: str | None = Field(
        default=None,
        description="A one-time link (`SWITCHYARD_PUBLIC_URL` + `/console/invitations/...`) with which the first "
        "owner chooses a console password and signs in; valid until `owner_invitation_expires_at`, shown once.",
    )
    owner_invitation_expires_at: datetime | None = Field(
        default=None, description="When `owner_invitation_url` stops working (seven days after creation)."
    )
