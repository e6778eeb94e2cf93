"""``OPTIONS`` answers with an ``allow`` header that lists every method of the path.

Litestar answers OPTIONS itself, but when a path's handlers are registered in more than one step (a controller's
list and create routes) its answer lists only the methods of the first step (Litestar 2.25: ``allow: OPTIONS,
POST`` on ``/v1/members``, which has GET too). The application's route table knows them all.
"""

from __future__ import annotations

from typing import Any

from litestar.datastructures import MutableScopeHeaders
from litestar.routes import HTTPRoute

__all__ = ["list_allowed_methods"]


async def list_allowed_methods(message: Any, scope: Any) -> None:
    """A ``before_send`` hook: the ``allow`` header of an answer to OPTIONS, from the route table."""
    if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS" or message["status"] != 204:
        return
    template = scope.get("path_template")
    methods = {
        method
        for route in scope["litestar_app"].routes
        if isinstance(route, HTTPRoute) and route.path_format == template
        for method in route.methods
    }
    if methods:
        MutableScopeHeaders.from_message(message)["allow"] = ", ".join(sorted(methods))
