"""``/v1/responses`` and ``/v1/conversations`` in OpenAI's shape."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from litestar import Controller, Request, Response, delete, get, post
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.response import Stream

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import CurrentPrincipal, CurrentTenant, DbSession
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.execution.events import follow_events
from switchyard.platform.http.bodies import MAX_STORED_INTEGER
from switchyard.platform.http.errors import InvalidRequest, NotFound, RateLimited
from switchyard.platform.http.openapi import answers
from switchyard.platform.jobs import enqueue, jobs_for
from switchyard.platform.models import ResponseEventRecord, ResponseRecord, utc_now
from switchyard.platform.responses import cancellation, conversations, service
from switchyard.platform.responses.events import Event
from switchyard.platform.responses.executor import EXECUTE_TASK, execute_response
from switchyard.platform.responses.objects import FINISHED, conversation_object, response_object
from switchyard.platform.responses.schemas import (
    ConversationCreate,
    ConversationItemsCreate,
    ConversationUpdate,
    Includable,
    ResponseCreate,
)
from switchyard.platform.responses.store import response_row

__all__ = ["ConversationController", "ResponseController"]

log = logging.getLogger(__name__)

_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
_RESPONSE = answers(
    200,
    "The response; with `stream: true` its events as server-sent events.",
    {"application/json": dict[str, Any], "text/event-stream": dict[str, Any]},
)
Limit = Annotated[int, QueryParameter(ge=1, le=100, description="Items per page.")]
Order = Annotated[Literal["asc", "desc"], QueryParameter(description="By position; newest first by default.")]
After = Annotated[str | None, QueryParameter(description="List the items after this item id.")]


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _environment(request: Request[Any, Any, Any]) -> RunEnvironment:
    """What executing a response in this API process needs (the pool as served now)."""
    state = request.app.state
    gateway = state.gateway
    return RunEnvironment(
        database=state.database,
        pool=gateway.pool,
        admission=gateway.admission,
        lease_s=state.settings.agent_run_lease_seconds,
        tool_options=state.get("tool_options", {}),
        usage_committed=gateway.rating.usage_committed if gateway.rating is not None else None,
    )


async def _row(request: Request[Any, Any, Any], scope: TenantScope, response_id: str) -> ResponseRecord:
    """The response as stored now, stored or not (the caller just created it)."""
    async with request.app.state.database.unit_of_work(scope) as session:
        row = await response_row(session, scope, response_id, stored_only=False)
        session.expunge(row)
        return row


def _background_stream(request: Request[Any, Any, Any], scope: TenantScope, response_id: str, after: int) -> Stream:
    events = follow_events(
        request.app.state.database,
        scope,
        owner=ResponseRecord,
        events=ResponseEventRecord,
        events_owner=ResponseEventRecord.response_id,
        owner_id=response_id,
        paused=FINISHED,
        starting_after=after,
        render=lambda row: _sse(row.event, row.data),
    )
    return Stream(events, media_type="text/event-stream", headers=_SSE_HEADERS)


class ResponseController(Controller):
    path = "/v1/responses"
    tags = ["Responses"]
    guards = [require_access]

    @post(
        opt=access(Role.DEVELOPER),
        summary="Create a response",
        status_code=200,
        raises=[NotFound, BudgetExceeded, RateLimited],
        responses=_RESPONSE,
    )
    async def create_response(
        self, request: Request[Any, Any, Any], principal: CurrentPrincipal, data: JSONBody[ResponseCreate]
    ) -> Response[Any]:
        """Run a model (or an agent, named by `prompt.id`) on the input (OpenAI's Responses API).

        Client `function` tools end the response with `function_call` items; MCP servers and Switchyard's built-in
        tools run on the server. `usage.compute` reports the chip-microseconds of every model call. With
        `background: true` a worker executes the response (poll it, or stream it with `stream: true`)."""
        scope = principal.scope
        assert scope is not None  # the route's guard admits tenant keys only
        state = request.app.state
        gateway = state.gateway
        async with state.database.unit_of_work(scope) as session:
            prepared, response_id = await service.prepare(
                session, scope=scope, data=data, pool=gateway.pool, max_output_tokens=state.settings.max_output_tokens
            )
        holds = await service.admit(gateway.admission, prepared, principal)
        try:
            async with state.database.unit_of_work(scope) as session:
                row = await service.store(
                    session, scope=scope, principal=principal, prepared=prepared, response_id=response_id
                )
                await service.add_input_to_conversation(session, scope, row)
                if row.background:
                    enqueue(jobs_for(state), EXECUTE_TASK, scope.tenant_id, row.id, session=session)
                created = response_object(row)
        except BaseException:
            if holds is not None:
                await gateway.admission.finish(holds, billed=False)
            raise
        if data.background:
            if data.stream:
                return _background_stream(request, scope, response_id, -1)
            return Response(created)
        env = _environment(request)
        if not data.stream:
            task = gateway.spawn(
                execute_response(env, tenant_id=scope.tenant_id, response_id=response_id, admitted=holds)
            )
            await asyncio.shield(task)
            return Response(response_object(await _row(request, scope, response_id)))
        channel: asyncio.Queue[list[Event] | None] = asyncio.Queue()
        task = gateway.spawn(
            execute_response(
                env, tenant_id=scope.tenant_id, response_id=response_id, listener=channel.put_nowait, admitted=holds
            )
        )
        task.add_done_callback(lambda _: channel.put_nowait(None))
        return Stream(_live(channel, task), media_type="text/event-stream", headers=_SSE_HEADERS)

    @get("/{response_id:str}", opt=access(Role.VIEWER), summary="Get a response", responses=_RESPONSE)
    async def get_response(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        response_id: FromPath[str],
        stream: Annotated[bool, QueryParameter(description="Stream a background response's events.")] = False,
        starting_after: Annotated[
            int | None,
            QueryParameter(ge=0, le=MAX_STORED_INTEGER, description="Resume the stream after this sequence number."),
        ] = None,
        include: Annotated[
            list[Includable] | None, QueryParameter(description="One of OpenAI's includable values; ignored.")
        ] = None,
    ) -> Response[Any]:
        row = await response_row(db_session, tenant, response_id)
        if stream:
            if not row.background:
                raise InvalidRequest(
                    "only background responses can be streamed again", param="stream", code="not_background"
                )
            return _background_stream(request, tenant, response_id, -1 if starting_after is None else starting_after)
        return Response(response_object(row))

    @delete("/{response_id:str}", opt=access(Role.DEVELOPER), summary="Delete a response", status_code=200)
    async def delete_response(
        self, db_session: DbSession, tenant: CurrentTenant, response_id: FromPath[str]
    ) -> dict[str, Any]:
        """Hide the response from every read and from `previous_response_id` (its books stay); a background
        response still running is cancelled (what it used is billed)."""
        row = await response_row(db_session, tenant, response_id)
        if row.background:
            await cancellation.cancel(db_session, tenant, row)
        row.stored = False
        row.input_items = []
        return {"id": response_id, "object": "response.deleted", "deleted": True}

    @post(
        "/{response_id:str}/cancel", opt=access(Role.DEVELOPER), summary="Cancel a background response", status_code=200
    )
    async def cancel_response(
        self, db_session: DbSession, tenant: CurrentTenant, response_id: FromPath[str]
    ) -> dict[str, Any]:
        """A queued response is cancelled at once; a running one within a second, its model call stopped where it
        is (the tokens it generated are billed). It ends `cancelled`."""
        row = await response_row(db_session, tenant, response_id)
        service.not_background(row)
        await cancellation.cancel(db_session, tenant, row)
        return response_object(row)

    @get("/{response_id:str}/input_items", opt=access(Role.VIEWER), summary="List a response's input items")
    async def list_input_items(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        response_id: FromPath[str],
        after: After = None,
        limit: Limit = 20,
        order: Order = "desc",
        include: Annotated[
            list[Includable] | None, QueryParameter(description="One of OpenAI's includable values; ignored.")
        ] = None,
    ) -> dict[str, Any]:
        row = await response_row(db_session, tenant, response_id)
        items = row.input_items if order == "asc" else list(reversed(row.input_items))
        return conversations.item_page(items, after=after, limit=limit)


async def _live(channel: asyncio.Queue[list[Event] | None], task: asyncio.Task[str]) -> AsyncIterator[bytes]:
    """A foreground response's events as they happen; the response goes on if the client leaves."""
    while True:
        events = await channel.get()
        if events is None:
            break
        for name, data in events:
            yield _sse(name, data)
    if not task.cancelled() and task.exception() is not None:
        log.error("response failed", exc_info=task.exception())
        error = {"type": "error", "code": "server_error", "message": "the response failed", "param": None}
        yield _sse("error", error)


class ConversationController(Controller):
    path = "/v1/conversations"
    tags = ["Conversations"]
    guards = [require_access]

    @post(opt=access(Role.DEVELOPER), summary="Create a conversation", status_code=200)
    async def create_conversation(
        self, db_session: DbSession, tenant: CurrentTenant, data: JSONBody[ConversationCreate]
    ) -> dict[str, Any]:
        row = await conversations.create(db_session, tenant, data)
        return conversation_object(row)

    @get("/{conversation_id:str}", opt=access(Role.VIEWER), summary="Get a conversation")
    async def get_conversation(
        self, db_session: DbSession, tenant: CurrentTenant, conversation_id: FromPath[str]
    ) -> dict[str, Any]:
        return conversation_object(await conversations.get(db_session, tenant, conversation_id))

    @post("/{conversation_id:str}", opt=access(Role.DEVELOPER), summary="Update a conversation", status_code=200)
    async def update_conversation(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        conversation_id: FromPath[str],
        data: JSONBody[ConversationUpdate],
    ) -> dict[str, Any]:
        row = await conversations.get(db_session, tenant, conversation_id)
        row.metadata_json = dict(data.metadata)
        return conversation_object(row)

    @delete("/{conversation_id:str}", opt=access(Role.DEVELOPER), summary="Delete a conversation", status_code=200)
    async def delete_conversation(
        self, db_session: DbSession, tenant: CurrentTenant, conversation_id: FromPath[str]
    ) -> dict[str, Any]:
        row = await conversations.get(db_session, tenant, conversation_id)
        row.deleted_at = utc_now()
        return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}

    @get("/{conversation_id:str}/items", opt=access(Role.VIEWER), summary="List a conversation's items")
    async def list_items(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        conversation_id: FromPath[str],
        after: After = None,
        limit: Limit = 20,
        order: Order = "desc",
        include: Annotated[
            list[Includable] | None, QueryParameter(description="One of OpenAI's includable values; ignored.")
        ] = None,
    ) -> dict[str, Any]:
        await conversations.get(db_session, tenant, conversation_id)
        return await conversations.list_items(
            db_session, tenant, conversation_id, after=after, limit=limit, order=order
        )

    @post(
        "/{conversation_id:str}/items",
        opt=access(Role.DEVELOPER),
        summary="Add items to a conversation",
        status_code=200,
    )
    async def add_items(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        conversation_id: FromPath[str],
        data: JSONBody[ConversationItemsCreate],
    ) -> dict[str, Any]:
        await conversations.get(db_session, tenant, conversation_id)
        items = await conversations.add_items(db_session, tenant, conversation_id, data.items)
        return conversations.item_page(items, after=None, limit=len(items))

    @get("/{conversation_id:str}/items/{item_id:str}", opt=access(Role.VIEWER), summary="Get a conversation item")
    async def get_item(
        self, db_session: DbSession, tenant: CurrentTenant, conversation_id: FromPath[str], item_id: FromPath[str]
    ) -> dict[str, Any]:
        await conversations.get(db_session, tenant, conversation_id)
        return dict((await conversations.item_row(db_session, tenant, conversation_id, item_id)).item)

    @delete(
        "/{conversation_id:str}/items/{item_id:str}",
        opt=access(Role.DEVELOPER),
        summary="Delete a conversation item",
        status_code=200,
    )
    async def delete_item(
        self, db_session: DbSession, tenant: CurrentTenant, conversation_id: FromPath[str], item_id: FromPath[str]
    ) -> dict[str, Any]:
        row = await conversations.get(db_session, tenant, conversation_id)
        await db_session.delete(await conversations.item_row(db_session, tenant, conversation_id, item_id))
        return conversation_object(row)
