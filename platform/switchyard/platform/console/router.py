"""The console router: every page under ``/console``, behind one session guard, rendered on the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from litestar import Request, Response, Router
from litestar.exceptions import HTTPException
from litestar.response import Redirect
from litestar.static_files import create_static_files_router

from switchyard.platform.console.edge import (
    CONSOLE_PREFIX,
    ConsoleSessionMiddleware,
    SignInRequired,
    console_access,
    require_console_access,
    sign_in_url,
)
from switchyard.platform.console.operator import operator_router
from switchyard.platform.console.pages.agents import AgentPagesController
from switchyard.platform.console.pages.audit import AuditPagesController
from switchyard.platform.console.pages.auth import SignInController
from switchyard.platform.console.pages.billing import BillingPagesController
from switchyard.platform.console.pages.invitations import InvitationController
from switchyard.platform.console.pages.keys import KeyPagesController
from switchyard.platform.console.pages.knowledge import KnowledgePagesController
from switchyard.platform.console.pages.knowledge_tools import KnowledgeToolsController
from switchyard.platform.console.pages.knowledge_upload import KnowledgeUploadController
from switchyard.platform.console.pages.members import MemberPagesController, PasswordController
from switchyard.platform.console.pages.overview import OverviewController
from switchyard.platform.console.pages.password_reset import PasswordResetController
from switchyard.platform.console.pages.playground import PlaygroundController
from switchyard.platform.console.pages.runs import RunPagesController
from switchyard.platform.console.pages.usage import UsagePagesController
from switchyard.platform.console.pages.workflow_runs import WorkflowRunsController
from switchyard.platform.console.pages.workflows import WorkflowPagesController
from switchyard.platform.console.render import SECURITY_HEADERS, render

__all__ = ["console_router"]

STATIC_DIR = Path(__file__).parent / "static"
_TITLES = {400: "Not accepted", 403: "Not allowed", 404: "Not found", 409: "Conflict", 429: "Slow down"}


def _to_sign_in(request: Request[Any, Any, Any], exc: SignInRequired) -> Response[Any]:
    if request.headers.get("hx-request") == "true":  # htmx would follow a redirect and swap the sign-in page into
        # the element it updates (the fleet's poll once the session ended): send the window there, back to its page
        shown = urlsplit(request.headers.get("hx-current-url", "")).path
        next_path = shown if shown.startswith(CONSOLE_PREFIX) else exc.next_path
        return Response("", status_code=200, headers={**SECURITY_HEADERS, "hx-redirect": sign_in_url(next_path)})
    return Redirect(sign_in_url(exc.next_path), status_code=302, headers=SECURITY_HEADERS)


def _error_page(request: Request[Any, Any, Any], exc: HTTPException) -> Response[str]:
    status = exc.status_code
    return render(
        request,
        "error.html",
        status_code=status,
        status_code_text=str(status),
        title=_TITLES.get(status, "Something went wrong"),
        message=exc.detail if status < 500 else "The server could not answer this page.",
        headers=dict(exc.headers or {}),
    )


def _static_files() -> Router:
    return create_static_files_router(
        path="/static",
        directories=[STATIC_DIR],
        opt=console_access("public"),
        include_in_schema=False,
        cache_control=None,
        name="console_static",
    )


console_router = Router(
    path=CONSOLE_PREFIX,
    route_handlers=[
        SignInController,
        InvitationController,
        PasswordResetController,
        OverviewController,
        AgentPagesController,
        WorkflowPagesController,
        WorkflowRunsController,
        KnowledgePagesController,
        KnowledgeUploadController,
        KnowledgeToolsController,
        KeyPagesController,
        RunPagesController,
        UsagePagesController,
        MemberPagesController,
        PasswordController,
        BillingPagesController,
        PlaygroundController,
        AuditPagesController,
        operator_router,
        _static_files(),
    ],
    guards=[require_console_access],
    middleware=[ConsoleSessionMiddleware()],
    exception_handlers={SignInRequired: _to_sign_in, HTTPException: _error_page},
    opt={"exclude_from_auth": True},  # the API's bearer-key middleware: the console signs in with sessions
    include_in_schema=False,
)
"""Mount with ``Litestar(route_handlers=[..., console_router])``."""
