"""``/v1/files``, OpenAI's Files API: the official client's ``files.create/list/retrieve/content/delete`` work
unchanged.

An upload's body may be as large as the largest file plus its form (:func:`file_routes` gives that route alone
its own limit); every other route keeps ``max_request_body_bytes``.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import quote

from litestar import Controller, Response, Router, delete, get, post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, QueryParameter
from litestar.status_codes import HTTP_200_OK

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentActor, CurrentTenant, DbSession
from switchyard.platform.http.errors import InvalidRequest, NotFound
from switchyard.platform.http.openapi import answers
from switchyard.platform.http.pagination import CursorParams, Page
from switchyard.platform.knowledge.files import service
from switchyard.platform.knowledge.files.schemas import FileDeleted, FilePublic, FileUpload
from switchyard.platform.knowledge.files.service import FileLimits, FileTooLarge
from switchyard.platform.settings import Settings

__all__ = ["UPLOAD_FORM_BYTES", "FileController", "FileUploadController", "file_routes"]

UPLOAD_FORM_BYTES = 64 * 1024
"""What an upload's body may hold besides the file: the form's boundaries, part headers and other fields."""

MAX_LIST_LIMIT = 10_000
"""OpenAI's largest (and default) page of files: listing reads no file's bytes."""


def file_routes(settings: Settings) -> Router:
    """The ``/v1/files`` routes: uploads take bodies up to ``max_file_bytes`` plus :data:`UPLOAD_FORM_BYTES`."""
    uploads = Router(
        path="/",
        route_handlers=[FileUploadController],
        request_max_body_size=settings.max_file_bytes + UPLOAD_FORM_BYTES,
    )
    return Router(path="/", route_handlers=[uploads, FileController])


class FileUploadController(Controller):
    path = "/v1/files"
    tags = ["Files"]
    guards = [require_access]

    @post(
        opt=access(Role.DEVELOPER),
        status_code=HTTP_200_OK,
        summary="Upload a file",
        raises=[InvalidRequest, FileTooLarge],
    )
    async def create_file(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        settings: NamedDependency[Settings],
        data: Annotated[FileUpload, Body(media_type=RequestEncodingType.MULTI_PART)],
    ) -> FilePublic:
        """Store a file (``multipart/form-data``: ``file``, ``purpose``, optionally ``expires_after[anchor]`` and
        ``expires_after[seconds]``); it is ``processed`` when this answers. 413 past the file's or the tenant's
        limit, and nothing is stored."""
        limits = FileLimits(max_file_bytes=settings.max_file_bytes, max_tenant_bytes=settings.max_tenant_file_bytes)
        return await service.create_file(db_session, scope=tenant, actor=actor, upload=data, limits=limits)


class FileController(Controller):
    path = "/v1/files"
    tags = ["Files"]
    guards = [require_access]

    @get(opt=access(Role.VIEWER), summary="List files")
    async def list_files(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        purpose: Annotated[str | None, QueryParameter(description="Only files of this purpose.")] = None,
        limit: Annotated[
            int, QueryParameter(ge=1, le=MAX_LIST_LIMIT, description=f"Page size, 1 to {MAX_LIST_LIMIT:,}.")
        ] = MAX_LIST_LIMIT,
        after: Annotated[
            str | None, QueryParameter(description="Return files after this id (next page); an id of this list.")
        ] = None,
        before: Annotated[
            str | None, QueryParameter(description="Return files before this id (previous page); an id of this list.")
        ] = None,
        order: Annotated[Literal["asc", "desc"], QueryParameter(description="Sort by creation time.")] = "desc",
    ) -> Page[FilePublic]:
        """The tenant's files (neither deleted nor expired); pages as OpenAI's do, up to 10,000 files each."""
        params = CursorParams(limit=limit, after=after, before=before, order=order)
        return await service.list_files(db_session, scope=tenant, purpose=purpose, params=params)

    @get("/{file_id:str}", opt=access(Role.VIEWER), summary="Get a file", raises=[NotFound])
    async def get_file(self, db_session: DbSession, tenant: CurrentTenant, file_id: FromPath[str]) -> FilePublic:
        return await service.get_file(db_session, scope=tenant, file_id=file_id)

    @get(
        "/{file_id:str}/content",
        opt=access(Role.VIEWER),
        summary="Get a file's bytes",
        raises=[NotFound],
        responses=answers(HTTP_200_OK, "The file's bytes, as a download.", {"application/octet-stream": bytes}),
    )
    async def get_file_content(
        self, db_session: DbSession, tenant: CurrentTenant, file_id: FromPath[str]
    ) -> Response[bytes]:
        """The bytes as uploaded, as OpenAI sends them (``application/octet-stream``), and as an attachment named
        like the file: a browser never renders a tenant's file as a page of this server."""
        content = await service.file_content(db_session, scope=tenant, file_id=file_id)
        headers = {
            "content-disposition": f"attachment; filename*=UTF-8''{quote(content.filename, safe='')}",
            "x-content-type-options": "nosniff",
        }
        return Response(content.data, media_type="application/octet-stream", headers=headers)

    @delete("/{file_id:str}", opt=access(Role.DEVELOPER), status_code=HTTP_200_OK, summary="Delete a file")
    async def delete_file(
        self, db_session: DbSession, tenant: CurrentTenant, actor: CurrentActor, file_id: FromPath[str]
    ) -> FileDeleted:
        """Remove the file's bytes and detach it from every vector store (its chunks go with it)."""
        return await service.delete_file(db_session, scope=tenant, actor=actor, file_id=file_id)
