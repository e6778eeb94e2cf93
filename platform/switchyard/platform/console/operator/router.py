"""The operator pages' router, mounted inside the console's (whose guard and error pages cover it)."""

from __future__ import annotations

from litestar import Router

from switchyard.platform.console.operator.audit import OperatorAuditPageController
from switchyard.platform.console.operator.auth import OperatorSignInController
from switchyard.platform.console.operator.capacity import CapacityPageController
from switchyard.platform.console.operator.edge import OperatorSessionMiddleware
from switchyard.platform.console.operator.pages import FleetPageController, RateCardPagesController
from switchyard.platform.console.operator.tenants import TenantPagesController

__all__ = ["operator_router"]

operator_router = Router(
    path="/operator",
    route_handlers=[
        OperatorSignInController,
        TenantPagesController,
        CapacityPageController,
        RateCardPagesController,
        FleetPageController,
        OperatorAuditPageController,
    ],
    middleware=[OperatorSessionMiddleware()],
    include_in_schema=False,
)
