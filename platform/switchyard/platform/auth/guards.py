"""Route guards: the role a route needs is declared on the route (``opt``) and checked here.

Every route declares ``opt={"access": ...}``: ``"public"``, ``"operator"`` or a minimum ``Role``. The isolation
test matrix reads the same declaration, so a route cannot be added without saying who may call it.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers import HTTPRouteHandler
from litestar.handlers.base import BaseRouteHandler

from switchyard.platform.auth.principal import Principal
from switchyard.platform.auth.roles import Role
from switchyard.platform.http.errors import PermissionDenied

__all__ = ["access", "require_access"]


def access(level: str | Role) -> dict[str, Any]:
    """The ``opt`` of a route that ``level`` may call (use with ``guards=[require_access]``)."""
    return {"access": level}


async def require_access(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Refuse the call unless the caller may use the route (async: Litestar runs sync guards in a thread)."""
    level = handler.opt.get("access")
    if level is None and isinstance(handler, HTTPRouteHandler) and handler.http_methods == {"OPTIONS"}:
        return  # Litestar's own answer to OPTIONS: the methods of the path (`allow`), nothing else
    if level is None:
        raise RuntimeError(f"route {handler!r} declares no access level")
    if level == "public":
        return
    principal: Principal = connection.user
    if level == "operator":
        if not principal.is_operator:
            raise PermissionDenied("this operation needs an operator key")
        return
    needed = Role(level)
    if principal.is_operator or principal.role is None:
        raise PermissionDenied("this operation needs a tenant API key")
    if not principal.role.includes(needed):
        raise PermissionDenied(f"this operation needs role {needed.value} or higher (key has {principal.role.value})")
