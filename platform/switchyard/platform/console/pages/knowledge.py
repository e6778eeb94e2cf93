"""Knowledge: the tenant's vector stores, each store's files and how far their ingestion got, and the confirmation
pages that detach a file or delete a store. A thin layer over ``knowledge.vector_stores`` and ``knowledge.files``:
every change goes through the services ``/v1/vector_stores`` uses, so ingestion starts exactly as the API's does.

Uploading (``knowledge_upload``), searching and attaching a store to an agent (``knowledge_tools``) answer with the
store's page as well (``knowledge_view``).
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Redirect

from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.pages.knowledge_view import filename_of, store_files, store_page, unix_when
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.jobs import jobs_for
from switchyard.platform.knowledge.vector_stores import attachments
from switchyard.platform.knowledge.vector_stores import service as stores
from switchyard.platform.knowledge.vector_stores.schemas import VectorStoreCreate

__all__ = ["KnowledgePagesController"]


class KnowledgePagesController(Controller):
    path = "/knowledge"

    async def _list(
        self, request: Request[Any, Any, Any], db_session: DbSession, *, status_code: int = 200, **context: Any
    ) -> Response[str]:
        user = console_user(request)
        page = await stores.list_stores(
            db_session, scope=user.scope, params=CursorParams(limit=100, after=None, before=None, order="desc")
        )
        return render(
            request,
            "knowledge.html",
            status_code=status_code,
            stores=page.data,
            has_more=page.has_more,
            can_change=user.role.includes(Role.ADMIN),
            unix_when=unix_when,
            **context,
        )

    @get("/", opt=console_access(Role.VIEWER))
    async def list_stores(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        return await self._list(request, db_session)

    @post("/", opt=console_access(Role.ADMIN), status_code=303)
    async def create_store(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        """A new, empty store (its embedding model the tenant's default); its page, to upload files to it."""
        form = await request.form()
        name = str(form.get("name", "")).strip()
        days = str(form.get("expires_after_days", "")).strip()
        typed = {"name": name, "expires_after_days": days}
        if not name:
            return await self._list(request, db_session, status_code=400, error="Give the store a name.", typed=typed)
        if days and not (days.isascii() and days.isdigit() and 1 <= int(days) <= 365):
            error = "Expiry is a whole number of days from 1 to 365 (or empty: never)."
            return await self._list(request, db_session, status_code=400, error=error, typed=typed)
        expires = {"anchor": "last_active_at", "days": int(days)} if days else None
        try:
            data = VectorStoreCreate.model_validate({"name": name, "expires_after": expires})
        except ValueError:
            error = "The name is at most 256 characters."
            return await self._list(request, db_session, status_code=400, error=error, typed=typed)
        state = request.app.state
        try:
            store = await stores.create_store(
                db_session,
                scope=console_user(request).scope,
                data=data,
                pool=state.gateway.pool,
                default_model=state.settings.vector_store_embedding_model,
                jobs=jobs_for(state),
            )
        except ApiError as error:  # no embedding model serves the tenant
            await db_session.rollback()
            return await self._list(
                request, db_session, status_code=error.status_code, error=error.message, typed=typed
            )
        return Redirect(f"{CONSOLE_PREFIX}/knowledge/{store.id}", status_code=303)

    @get("/{vector_store_id:str}", opt=console_access(Role.VIEWER))
    async def show_store(
        self, request: Request[Any, Any, Any], db_session: DbSession, vector_store_id: FromPath[str]
    ) -> Response[str]:
        return await store_page(request, db_session, vector_store_id)

    @get("/{vector_store_id:str}/files", opt=console_access(Role.VIEWER))
    async def files_fragment(
        self, request: Request[Any, Any, Any], db_session: DbSession, vector_store_id: FromPath[str]
    ) -> Response[str]:
        """The store's counts and files alone: what the page polls every 2 s while a file is being ingested (the
        answer stops the polling once none is)."""
        scope = console_user(request).scope
        store = await stores.get_store(db_session, scope=scope, vector_store_id=vector_store_id)
        return render(
            request,
            "knowledge_files.html",
            store=store,
            files=await store_files(db_session, scope, vector_store_id),
            can_change=console_user(request).role.includes(Role.ADMIN),
            unix_when=unix_when,
        )

    @get("/{vector_store_id:str}/files/{file_id:str}/detach", opt=console_access(Role.ADMIN))
    async def confirm_detach(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        vector_store_id: FromPath[str],
        file_id: FromPath[str],
    ) -> Response[str]:
        """Asks before detaching a file (a page of its own: it needs no script)."""
        scope = console_user(request).scope
        store = await stores.get_store(db_session, scope=scope, vector_store_id=vector_store_id)
        attached = await stores.get_file(db_session, scope=scope, vector_store_id=vector_store_id, file_id=file_id)
        filename = await filename_of(db_session, scope, attached.id)
        return render(request, "knowledge_detach.html", store=store, file_id=attached.id, filename=filename)

    @post("/{vector_store_id:str}/files/{file_id:str}/detach", opt=console_access(Role.ADMIN), status_code=303)
    async def detach(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        vector_store_id: FromPath[str],
        file_id: FromPath[str],
    ) -> Response[Any]:
        """Detach the file: its chunks leave the store; the file itself stays (``/v1/files``)."""
        scope = console_user(request).scope
        await stores.get_store(db_session, scope=scope, vector_store_id=vector_store_id)
        await attachments.detach(db_session, scope=scope, vector_store_id=vector_store_id, file_id=file_id)
        return Redirect(f"{CONSOLE_PREFIX}/knowledge/{vector_store_id}", status_code=303)

    @get("/{vector_store_id:str}/delete", opt=console_access(Role.ADMIN))
    async def confirm_delete(
        self, request: Request[Any, Any, Any], db_session: DbSession, vector_store_id: FromPath[str]
    ) -> Response[str]:
        store = await stores.get_store(db_session, scope=console_user(request).scope, vector_store_id=vector_store_id)
        return render(request, "knowledge_delete.html", store=store)

    @post("/{vector_store_id:str}/delete", opt=console_access(Role.ADMIN), status_code=303)
    async def delete_store(
        self, request: Request[Any, Any, Any], db_session: DbSession, vector_store_id: FromPath[str]
    ) -> Response[Any]:
        """Delete the store and its chunks; its files stay (``/v1/files``)."""
        await stores.delete_store(db_session, scope=console_user(request).scope, vector_store_id=vector_store_id)
        return Redirect(f"{CONSOLE_PREFIX}/knowledge", status_code=303)
