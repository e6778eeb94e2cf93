from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from switchyard.platform.models import AuditEvent, OperatorAuditEvent

__all__ = ["AuditEventPublic", "OperatorAuditEventPublic"]


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


class OperatorAuditEventPublic(AuditEventPublic):
    """One recorded operator action."""

    object: Literal["operator_audit_event"] = "operator_audit_event"  # type: ignore[assignment]

    @classmethod
    def of(cls, row: AuditEvent | OperatorAuditEvent) -> OperatorAuditEventPublic:
        return cls.model_validate(row, from_attributes=True)
