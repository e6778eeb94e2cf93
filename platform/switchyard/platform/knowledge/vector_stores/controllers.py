"""``/v1/vector_stores``, its files and file batches, in OpenAI's shapes: the official client's
``vector_stores.*``, ``vector_stores.files.*`` and ``vector_stores.file_batches.*`` work unchanged."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Controller, Request, delete, get, post
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentPrincipal, CurrentTenant, DbSession, PageParams
from switchyard.platform.http.errors import InvalidRequest, NotFound
from switchyard.platform.http.pagination import Page
from switchyard.platform.jobs import jobs_for
from switchyard.platform.knowledge.vector_stores import attachments, service
from switchyard.platform.knowledge.vector_stores.schemas import (
    FileBatchCreate,
    FileBatchPublic,
    FileContentPage,
    VectorStoreCreate,
    VectorStoreDeleted,
    VectorStoreFileCreate,
    VectorStoreFileDeleted,
    VectorStoreFilePublic,
    VectorStoreFileUpdate,
    VectorStorePublic,
    VectorStoreUpdate,
)

__all__ = ["VectorStoreController", "VectorStoreFileController"]

StatusFilter = Annotated[
    Literal["in_progress", "completed", "failed", "cancelled"] | None,
    QueryParameter(name="filter", description="Only files of this status."),
]


class VectorStoreController(Controller):
    path = "/v1/vector_stores"
    tags = ["Vector stores"]
    guards = [require_access]

    @post(opt=access(Role.DEVELOPER), status_code=HTTP_200_OK, summary="Create a vector store", raises=[NotFound])
    async def create_vector_store(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        principal: CurrentPrincipal,
        data: JSONBody[VectorStoreCreate],
    ) -> VectorStorePublic:
        """A store of files searched together; its `file_ids` are ingested by the workers (parsed, chunked,
        embedded with `embedding_model`, billed in chip-µs): poll the store's `file_counts`."""
        state = request.app.state
        return await service.create_store(
            db_session,
            scope=tenant,
            data=data,
            pool=state.gateway.pool,
            default_model=state.settings.vector_store_embedding_model,
            jobs=jobs_for(state),
            api_key_id=principal.key_id,
        )

    @get(opt=access(Role.VIEWER), summary="List vector stores")
    async def list_vector_stores(
        self, db_session: DbSession, tenant: CurrentTenant, page: PageParams
    ) -> Page[VectorStorePublic]:
        return await service.list_stores(db_session, scope=tenant, params=page)

    @get("/{vector_store_id:str}", opt=access(Role.VIEWER), summary="Get a vector store")
    async def get_vector_store(
        self, db_session: DbSession, tenant: CurrentTenant, vector_store_id: FromPath[str]
    ) -> VectorStorePublic:
        return await service.get_store(db_session, scope=tenant, vector_store_id=vector_store_id)

    @post(
        "/{vector_store_id:str}", opt=access(Role.DEVELOPER), status_code=HTTP_200_OK, summary="Modify a vector store"
    )
    async def modify_vector_store(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        vector_store_id: FromPath[str],
        data: JSONBody[VectorStoreUpdate],
    ) -> VectorStorePublic:
        """Change its name, metadata or expiry policy (`expires_after: null` removes it)."""
        return await service.modify_store(db_session, scope=tenant, vector_store_id=vector_store_id, data=data)

    @delete(
        "/{vector_store_id:str}", opt=access(Role.DEVELOPER), status_code=HTTP_200_OK, summary="Delete a vector store"
    )
    async def delete_vector_store(
        self, db_session: DbSession, tenant: CurrentTenant, vector_store_id: FromPath[str]
    ) -> VectorStoreDeleted:
        """Delete the store and its chunks; its files stay in `/v1/files`."""
        return await service.delete_store(db_session, scope=tenant, vector_store_id=vector_store_id)


class VectorStoreFileController(Controller):
    path = "/v1/vector_stores/{vector_store_id:str}"
    tags = ["Vector stores"]
    guards = [require_access]

    @post("/files", opt=access(Role.DEVELOPER), status_code=HTTP_200_OK, summary="Attach a file to a vector store")
    async def create_vector_store_file(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        principal: CurrentPrincipal,
        vector_store_id: FromPath[str],
        data: JSONBody[VectorStoreFileCreate],
    ) -> VectorStoreFilePublic:
        """Attach a file (`/v1/files`) to be ingested; attaching it again answers it as it is."""
        state = request.app.state
        return await service.add_file(
            db_session,
            scope=tenant,
            vector_store_id=vector_store_id,
            data=data,
            pool=state.gateway.pool,
            jobs=jobs_for(state),
            api_key_id=principal.key_id,
        )

    @get("/files", opt=access(Role.VIEWER), summary="List a vector store's files")
    async def list_vector_store_files(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        vector_store_id: FromPath[str],
        page: PageParams,
        status: StatusFilter = None,
    ) -> Page[VectorStoreFilePublic]:
        await service.get_store(db_session, scope=tenant, vector_store_id=vector_store_id)
        return await attachments.list_files(
            db_session, scope=tenant, vector_store_id=vector_store_id, params=page, status=status
        )

    @get("/files/{file_id:str}", opt=access(Role.VIEWER), summary="Get a vector store file")
    async def get_vector_store_file(
        self, db_session: DbSession, tenant: CurrentTenant, vector_store_id: FromPath[str], file_id: FromPath[str]
    ) -> VectorStoreFilePublic:
        return await service.get_file(db_session, scope=tenant, vector_store_id=vector_store_id, file_id=file_id)

    @post(
        "/files/{file_id:str}",
        opt=access(Role.DEVELOPER),
        status_code=HTTP_200_OK,
        summary="Update a vector store file's attributes",
    )
    async def update_vector_store_file(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        vector_store_id: FromPath[str],
        file_id: FromPath[str],
        data: JSONBody[VectorStoreFileUpdate],
    ) -> VectorStoreFilePublic:
        await service.get_store(db_session, scope=tenant, vector_store_id=vector_store_id)
        return await attachments.set_attributes(
            db_session, scope=tenant, vector_store_id=vector_store_id, file_id=file_id, attributes=data.attributes
        )

    @delete(
        "/files/{file_id:str}",
        opt=access(Role.DEVELOPER),
        status_code=HTTP_200_OK,
        summary="Detach a file from a vector store",
    )
    async def delete_vector_store_file(
        self, db_session: DbSession, tenant: CurrentTenant, vector_store_id: FromPath[str], file_id: FromPath[str]
    ) -> VectorStoreFileDeleted:
        """Remove the file's chunks from the store; the file stays in `/v1/files`."""
        await service.get_store(db_session, scope=tenant, vector_store_id=vector_store_id)
        return await attachments.detach(db_session, scope=tenant, vector_store_id=vector_store_id, file_id=file_id)

    @get("/files/{file_id:str}/content", opt=access(Role.VIEWER), summary="Get a vector store file's chunks")
    async def get_vector_store_file_content(
        self, db_session: DbSession, tenant: CurrentTenant, vector_store_id: FromPath[str], file_id: FromPath[str]
    ) -> FileContentPage:
        """The file's parsed chunks, in order (neighbours overlap by the chunking strategy's overlap)."""
        await service.get_store(db_session, scope=tenant, vector_store_id=vector_store_id)
        return await attachments.file_content(
            db_session, scope=tenant, vector_store_id=vector_store_id, file_id=file_id
        )

    @post(
        "/file_batches",
        opt=access(Role.DEVELOPER),
        status_code=HTTP_200_OK,
        summary="Attach a batch of files to a vector store",
        raises=[InvalidRequest],
    )
    async def create_file_batch(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        principal: CurrentPrincipal,
        vector_store_id: FromPath[str],
        data: JSONBody[FileBatchCreate],
    ) -> FileBatchPublic:
        """Attach `file_ids` (sharing `attributes` and `chunking_strategy`) or `files` (each with its own)."""
        state = request.app.state
        return await service.create_batch(
            db_session,
            scope=tenant,
            vector_store_id=vector_store_id,
            data=data,
            pool=state.gateway.pool,
            jobs=jobs_for(state),
            api_key_id=principal.key_id,
        )

    @get("/file_batches/{batch_id:str}", opt=access(Role.VIEWER), summary="Get a file batch")
    async def get_file_batch(
        self, db_session: DbSession, tenant: CurrentTenant, vector_store_id: FromPath[str], batch_id: FromPath[str]
    ) -> FileBatchPublic:
        return await service.get_batch(db_session, scope=tenant, vector_store_id=vector_store_id, batch_id=batch_id)

    @post(
        "/file_batches/{batch_id:str}/cancel",
        opt=access(Role.DEVELOPER),
        status_code=HTTP_200_OK,
        summary="Cancel a file batch",
    )
    async def cancel_file_batch(
        self, db_session: DbSession, tenant: CurrentTenant, vector_store_id: FromPath[str], batch_id: FromPath[str]
    ) -> FileBatchPublic:
        """Cancel the batch's files still being ingested (their chunks so far are removed)."""
        await service.get_store(db_session, scope=tenant, vector_store_id=vector_store_id)
        return await attachments.cancel_batch(
            db_session, scope=tenant, vector_store_id=vector_store_id, batch_id=batch_id
        )

    @get("/file_batches/{batch_id:str}/files", opt=access(Role.VIEWER), summary="List a file batch's files")
    async def list_file_batch_files(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        vector_store_id: FromPath[str],
        batch_id: FromPath[str],
        page: PageParams,
        status: StatusFilter = None,
    ) -> Page[VectorStoreFilePublic]:
        await service.get_batch(db_session, scope=tenant, vector_store_id=vector_store_id, batch_id=batch_id)
        return await attachments.list_files(
            db_session, scope=tenant, vector_store_id=vector_store_id, params=page, status=status, batch_id=batch_id
        )
