from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.params import QueryParameter

from switchyard.platform.audit import service
from switchyard.platform.audit.schemas import AuditEventPublic
from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentTenant, DbSession, PageParams
from switchyard.platform.http.pagination import Page

__all__ = ["AuditLogController"]


class AuditLogController(Controller):
    path = "/v1/audit-log"
    tags = ["Audit log"]
    guards = [require_access]

    @get(opt=access(Role.ADMIN), summary="List audit events")
    async def list_audit_events(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        page: PageParams,
        action: Annotated[str | None, QueryParameter(description="Only events with this action.")] = None,
    ) -> Page[AuditEventPublic]:
        """Every mutation in the caller's tenant, newest first."""
        return await service.list_events(db_session, tenant, page, action, AuditEventPublic.of)
