"""Uploading files to a vector store from its page: each file stored as ``POST /v1/files`` stores it (purpose
``assistants``) and attached as ``POST /v1/vector_stores/{id}/files`` attaches it, so its ingestion starts the same
way (one job per file, sent when the request commits). All the form's files or none: a refused file rolls back the
ones before it.

The form's body may hold what one API upload may (``SWITCHYARD_MAX_FILE_BYTES`` plus the form): the page's script
sends dropped files one request each, and a form of several files chosen without it shares that bound.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.datastructures import UploadFile
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.middleware import ASGIMiddleware
from litestar.params import FromPath
from litestar.response import Redirect
from litestar.types import ASGIApp, Empty, Receive, ReceiveMessage, Scope, Send
from litestar.utils.scope.state import ScopeState

from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.pages.knowledge_view import store_page
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.jobs import jobs_for
from switchyard.platform.knowledge.files import service as files
from switchyard.platform.knowledge.files.controllers import UPLOAD_FORM_BYTES
from switchyard.platform.knowledge.files.schemas import FileUpload
from switchyard.platform.knowledge.vector_stores import service as stores
from switchyard.platform.knowledge.vector_stores.schemas import VectorStoreFileCreate

__all__ = ["KnowledgeUploadController", "UploadBodyLimit"]


def _too_large(limit: int) -> HTTPException:
    return HTTPException(
        status_code=413,
        detail=f"The upload is larger than the {limit:,} bytes one upload may carry: send fewer or smaller files. "
        "Nothing was stored.",
    )


class UploadBodyLimit(ASGIMiddleware):
    """Bound the upload's body by the app's settings (the console's routes are made before the settings are
    known, so the handler itself declares no limit): refused when announced larger, or once more has arrived.
    Afterwards the form's spooled files are closed, whoever read the form (the console's CSRF check reads it, and
    a refused request never reaches the handler)."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        limit = scope["litestar_app"].state.settings.max_file_bytes + UPLOAD_FORM_BYTES
        announced = dict(scope["headers"]).get(b"content-length", b"")
        if announced.isdigit() and int(announced) > limit:
            raise _too_large(limit)
        received = 0

        async def bounded() -> ReceiveMessage:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _too_large(limit)
            return message

        try:
            await next_app(scope, bounded, send)
        finally:
            await _close_files(scope)


async def _close_files(scope: Scope) -> None:
    form = ScopeState.from_scope(scope).form  # the form as parsed, if anyone parsed it
    if form is Empty:
        return
    for values in form.values():
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, UploadFile):
                await value.close()


async def _is_empty(upload: UploadFile) -> bool:
    empty = not await upload.read(1)
    await upload.seek(0)
    return empty


class KnowledgeUploadController(Controller):
    path = "/knowledge"
    middleware = [UploadBodyLimit()]

    @post(
        "/{vector_store_id:str}/files",
        opt=console_access(Role.ADMIN),
        status_code=303,
        request_max_body_size=None,  # UploadBodyLimit bounds it
    )
    async def upload(
        self, request: Request[Any, Any, Any], db_session: DbSession, vector_store_id: FromPath[str]
    ) -> Response[Any]:
        """Store the form's files and attach them to the store; the store's page, where their ingestion shows."""
        user = console_user(request)
        await stores.get_store(db_session, scope=user.scope, vector_store_id=vector_store_id)
        form = await request.form()
        uploads = [part for part in form.getall("file", []) if isinstance(part, UploadFile) and part.filename]
        if not uploads:
            return await store_page(
                request, db_session, vector_store_id, status_code=400, upload_error="Choose a file to upload."
            )
        for upload in uploads:
            if await _is_empty(upload):
                error = f"“{upload.filename}” is empty: there is nothing in it to search. Nothing was uploaded."
                return await store_page(request, db_session, vector_store_id, status_code=400, upload_error=error)
        state = request.app.state
        limits = files.FileLimits(
            max_file_bytes=state.settings.max_file_bytes, max_tenant_bytes=state.settings.max_tenant_file_bytes
        )
        actor = Actor(key_id=user.member_id, request_id=request_id_of(request.scope))
        try:
            for upload in uploads:
                name = upload.filename
                stored = await files.create_file(
                    db_session,
                    scope=user.scope,
                    actor=actor,
                    upload=FileUpload.model_validate({"file": upload, "purpose": "assistants"}),
                    limits=limits,
                )
                await stores.add_file(
                    db_session,
                    scope=user.scope,
                    vector_store_id=vector_store_id,
                    data=VectorStoreFileCreate(file_id=stored.id),
                    pool=state.gateway.pool,
                    jobs=jobs_for(state),
                )
        except ApiError as refused:  # too large, past the tenant's quota, a name it cannot keep
            await db_session.rollback()  # the files stored before this one go too (and their jobs are not sent)
            error = f"“{name}”: {refused.message}. Nothing was uploaded."
            return await store_page(
                request, db_session, vector_store_id, status_code=refused.status_code, upload_error=error
            )
        return Redirect(f"{CONSOLE_PREFIX}/knowledge/{vector_store_id}", status_code=303)
