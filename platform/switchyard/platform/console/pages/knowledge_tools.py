"""What a store is for, tried from its page: a search of it (the search ``POST /v1/vector_stores/{id}/search`` and the
``file_search`` tool run, billed to the tenant as an embedding call), and attaching it to an agent (a new version
whose ``file_search`` tool searches it, saved and audited through the agent registry as the agent builder saves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Controller, Request, Response, post
from litestar.params import FromPath
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.platform.agent_registry import service as agent_service
from switchyard.platform.agent_registry.controllers import model_check
from switchyard.platform.agent_registry.schemas import AgentPublic, AgentUpdate
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.pages.knowledge_view import store_page
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError, NotFound
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.knowledge.search import SearchDeps, SearchHit, search_vector_stores
from switchyard.platform.knowledge.vector_stores import service as stores

__all__ = ["KnowledgeToolsController", "SearchTried", "with_store"]

MAX_RESULTS = 50
"""The most results a search answers (as the API's ``max_num_results``)."""


@dataclass(frozen=True, slots=True)
class SearchTried:
    """A search as the form sent it, and what it found (best first)."""

    query: str
    max_results: str
    hits: list[SearchHit]


def with_store(tools: list[dict[str, Any]], vector_store_id: str) -> list[dict[str, Any]] | None:
    """``tools`` with the store added to their ``file_search`` tool (one is added when there is none); ``None``
    when it searches the store already."""
    for index, tool in enumerate(tools):
        if tool.get("type") == "file_search":
            ids = list(tool.get("vector_store_ids") or [])
            if vector_store_id in ids:
                return None
            return [*tools[:index], {**tool, "vector_store_ids": [*ids, vector_store_id]}, *tools[index + 1 :]]
    return [*tools, {"type": "file_search", "vector_store_ids": [vector_store_id]}]


class KnowledgeToolsController(Controller):
    path = "/knowledge"

    @post("/{vector_store_id:str}/search", opt=console_access(Role.DEVELOPER), status_code=200)
    async def search(
        self, request: Request[Any, Any, Any], db_session: DbSession, vector_store_id: FromPath[str]
    ) -> Response[str]:
        """The store's chunks most relevant to the query, ranked as the API ranks them."""
        scope = console_user(request).scope
        await stores.get_store(db_session, scope=scope, vector_store_id=vector_store_id)
        form = await request.form()
        query = str(form.get("query", "")).strip()
        max_results = str(form.get("max_num_results", "") or "10").strip()
        tried = SearchTried(query=query, max_results=max_results, hits=[])
        if not query:
            return await store_page(
                request, db_session, vector_store_id, status_code=400, search=tried, search_error="Type a query."
            )
        if not (max_results.isascii() and max_results.isdigit() and 1 <= int(max_results) <= MAX_RESULTS):
            error = f"Results is a whole number from 1 to {MAX_RESULTS}."
            return await store_page(
                request, db_session, vector_store_id, status_code=400, search=tried, search_error=error
            )
        try:
            hits = await search_vector_stores(
                SearchDeps.of_gateway(request.app.state.gateway),
                scope,
                [vector_store_id],
                query,
                api_key_id=None,  # a member, not a key: billed to the tenant alone
                max_num_results=int(max_results),
            )
        except ApiError as refused:  # a query too long, a budget or rate that refuses the query's embedding
            return await store_page(
                request,
                db_session,
                vector_store_id,
                status_code=refused.status_code,
                search=tried,
                search_error=refused.message,
            )
        found = SearchTried(query=query, max_results=max_results, hits=hits)
        return await store_page(request, db_session, vector_store_id, search=found)

    @post("/{vector_store_id:str}/attach", opt=console_access(Role.ADMIN), status_code=303)
    async def attach_to_agent(
        self, request: Request[Any, Any, Any], db_session: DbSession, vector_store_id: FromPath[str]
    ) -> Response[Any]:
        """A new version of the chosen agent whose ``file_search`` tool searches this store too."""
        user = console_user(request)
        await stores.get_store(db_session, scope=user.scope, vector_store_id=vector_store_id)
        agent_id = str((await request.form()).get("agent_id", ""))
        try:
            agent: AgentPublic | None = await agent_service.get_agent(db_session, scope=user.scope, agent_id=agent_id)
        except NotFound:
            agent = None
        if agent is None:
            return await store_page(
                request, db_session, vector_store_id, status_code=400, attach_error="Choose one of your agents."
            )
        tools = with_store(agent.tools, vector_store_id)
        if tools is None:
            notice = f"{agent.name} searches this store already (version {agent.version}); nothing changed."
            return await store_page(request, db_session, vector_store_id, attach_notice=notice)
        try:
            await agent_service.update_agent(
                db_session,
                scope=user.scope,
                actor=Actor(key_id=user.member_id, request_id=request_id_of(request.scope)),
                agent_id=agent.id,
                data=AgentUpdate.model_validate({"tools": tools}),
                check_model=model_check(request, user.scope),
                max_output_tokens=request.app.state.settings.max_output_tokens,
            )
        except (ApiError, ValidationError) as refused:  # e.g. its file_search already searches 16 stores
            await db_session.rollback()
            message = refused.message if isinstance(refused, ApiError) else str(refused.errors()[0]["msg"])
            return await store_page(
                request,
                db_session,
                vector_store_id,
                status_code=400,
                attach_error=f"{agent.name} cannot search this store: {message}",
            )
        return Redirect(f"{CONSOLE_PREFIX}/agents/{agent.id}", status_code=303)
