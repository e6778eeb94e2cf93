"""How the knowledge pages show a store: its page (files, upload form, search, agents to attach it to), its files
with their names, and times of the API's objects. Every page that answers with the store's page renders it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response

from switchyard.platform.agent_registry import service as agent_service
from switchyard.platform.agent_registry.schemas import AgentPublic
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import console_user
from switchyard.platform.console.render import render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.knowledge.files import service as files
from switchyard.platform.knowledge.vector_stores import attachments
from switchyard.platform.knowledge.vector_stores import service as stores
from switchyard.platform.knowledge.vector_stores.schemas import VectorStoreFilePublic

__all__ = ["StoreFile", "filename_of", "store_files", "store_page", "unix_when"]

FILES_SHOWN = 100
"""The store page lists this many of the store's files, the latest attached first."""
AGENTS_OFFERED = 100
"""The store may be attached to one of the tenant's latest this many agents."""


def unix_when(seconds: int | None) -> str:
    """A time of the API's objects (Unix seconds) as the console writes times."""
    return "—" if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True, slots=True)
class StoreFile:
    """A file of a store as its page lists it: the attachment and the file's name."""

    attached: VectorStoreFilePublic
    filename: str


async def store_files(db_session: DbSession, scope: TenantScope, vector_store_id: str) -> list[StoreFile]:
    """The store's latest files with their names (a file that expired since it was attached shows as such)."""
    page = await attachments.list_files(
        db_session,
        scope=scope,
        vector_store_id=vector_store_id,
        params=CursorParams(limit=FILES_SHOWN, after=None, before=None, order="desc"),
    )
    return [StoreFile(attached, await filename_of(db_session, scope, attached.id)) for attached in page.data]


async def filename_of(db_session: DbSession, scope: TenantScope, file_id: str) -> str:
    """The name the file was uploaded with."""
    try:
        return (await files.get_file(db_session, scope=scope, file_id=file_id)).filename
    except NotFound:  # expired since it was attached (its attachment goes with the tenant's next upload)
        return "(file expired)"


async def _agents(db_session: DbSession, scope: TenantScope) -> list[AgentPublic]:
    """The tenant's latest agents by name: what the store may be attached to."""
    page = await agent_service.list_agents(
        db_session, scope=scope, params=CursorParams(limit=AGENTS_OFFERED, after=None, before=None, order="desc")
    )
    return sorted(page.data, key=lambda agent: agent.name.lower())


async def store_page(
    request: Request[Any, Any, Any],
    db_session: DbSession,
    vector_store_id: str,
    *,
    status_code: int = 200,
    **context: Any,
) -> Response[str]:
    """The store's page (404 for a store that is not the tenant's), with ``context`` (an error, search results)."""
    user = console_user(request)
    store = await stores.get_store(db_session, scope=user.scope, vector_store_id=vector_store_id)
    can_change = user.role.includes(Role.ADMIN)
    return render(
        request,
        "knowledge_store.html",
        status_code=status_code,
        store=store,
        files=await store_files(db_session, user.scope, vector_store_id),
        can_change=can_change,
        can_search=user.role.includes(Role.DEVELOPER),
        agents=await _agents(db_session, user.scope) if can_change else [],
        max_file_bytes=request.app.state.settings.max_file_bytes,
        unix_when=unix_when,
        **context,
    )
