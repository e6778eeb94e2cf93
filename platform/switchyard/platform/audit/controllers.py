from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.params import QueryParameter

from switchyard.platform.audit import service
from switchyard.platform.audit.schemas import AuditEventPublic, OperatorAuditEventPublic
from switchyard.platform.audit.service import AuditFilter
from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentTenant, DbSession, PageParams
from switchyard.platform.http.pagination import Page

__all__ = ["AuditLogController", "OperatorAuditLogController"]

_ACTION = Annotated[str | None, QueryParameter(description="Only events with this action.")]


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
        action: _ACTION = None,
    ) -> Page[AuditEventPublic]:
        """Every mutation in the caller's tenant, newest first."""
        return await service.list_events(db_session, tenant, page, AuditFilter(action=action), AuditEventPublic.of)


class OperatorAuditLogController(Controller):
    path = "/v1/admin/audit-log"
    tags = ["Operator: audit log"]
    guards = [require_access]

    @get(opt=access("operator"), summary="List operator audit events")
    async def list_operator_audit_events(
        self, db_session: DbSession, page: PageParams, action: _ACTION = None
    ) -> Page[OperatorAuditEventPublic]:
        """Every operator action (rate cards, fleet reloads, tenants, credits), newest first."""
        return await service.list_operator_events(
            db_session, page, AuditFilter(action=action), OperatorAuditEventPublic.of
        )
