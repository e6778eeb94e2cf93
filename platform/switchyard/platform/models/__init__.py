"""All tables, one per module; importing this package registers them on ``SQLModel.metadata``."""

from __future__ import annotations

from switchyard.platform.models.api_key import ApiKey
from switchyard.platform.models.audit_event import AuditEvent
from switchyard.platform.models.base import TenantOwned, utc_now
from switchyard.platform.models.idempotency_record import IdempotencyRecord
from switchyard.platform.models.member import Member
from switchyard.platform.models.operator_key import OperatorKey
from switchyard.platform.models.tenant import Tenant

__all__ = [
    "ApiKey",
    "AuditEvent",
    "IdempotencyRecord",
    "Member",
    "OperatorKey",
    "Tenant",
    "TenantOwned",
    "utc_now",
]
