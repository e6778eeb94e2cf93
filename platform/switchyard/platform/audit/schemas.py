from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from switchyard.platform.models import AuditEvent

__all__ = ["AuditEventPublic"]


class AuditEventPublic(BaseModel):
    """One recorded mutation."""

    object: Literal["audit_event"] = "audit_event"
    id: str
    actor: str
    action: str
    target_type: str
    target_id: str
    details: dict[str, Any]
    request_id: str | None
    created_at: datetime

    @classmethod
    def of(cls, row: AuditEvent) -> AuditEventPublic:
        return cls.model_validate(row, from_attributes=True)
