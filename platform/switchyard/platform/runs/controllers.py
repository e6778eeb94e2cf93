from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter
from litestar.response import Stream
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from switchyard.platform.agent_registry.controllers import model_check
from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import CurrentActor, CurrentTenant, DbSession, PageParams
from switchyard.platform.http.bodies import MAX_STORED_INTEGER, stored_integer
from switchyard.platform.http.errors import NotFound
from switchyard.platform.http.openapi import answers
from switchyard.platform.http.pagination import Page
from switchyard.platform.jobs import jobs_for
from switchyard.platform.models import Run
from switchyard.platform.runs import service
from switchyard.platform.runs.schemas import (
    RunCreate,
    RunEvent,
    RunPublic,
    StepPublic,
    SubmitApprovals,
    SubmitToolOutputs,
    ThreadAndRunCreate,
)
from switchyard.platform.runs.stream import last_event_number, run_events
from switchyard.platform.threads.schemas import ThreadCreate
from switchyard.platform.threads.service import create_thread

__all__ = ["RunController", "ThreadAndRunController"]

_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
_EVENTS = answers(HTTP_200_OK, "The run's events as server-sent events.", {"text/event-stream": RunEvent})
_RUN_OR_STREAM = {
    **answers(HTTP_201_CREATED, "The run (without `stream`).", {"application/json": RunPublic}),
    **_EVENTS,  # with `stream: true`
}


def _stream(request: Request[Any, Any, Any], scope: TenantScope, run_id: str, starting_after: int) -> Stream:
    events = run_events(request.app.state.database, scope, run_id, starting_after=starting_after)
    return Stream(events, media_type="text/event-stream", headers=_SSE_HEADERS, status_code=HTTP_200_OK)


def _run_or_stream(
    request: Request[Any, Any, Any], scope: TenantScope, run: Run, stream: bool, status_code: int, after: int = 0
) -> Response[Any]:
    if stream:
        return _stream(request, scope, run.id, after)
    return Response(RunPublic.of(run), status_code=status_code)


async def _last_sequence(request: Request[Any, Any, Any], scope: TenantScope, run_id: str) -> int:
    async with request.app.state.database.unit_of_work(scope) as session:
        return await last_event_number(session, scope, run_id)


class RunController(Controller):
    path = "/v1/threads/{thread_id:str}/runs"
    tags = ["Runs"]
    guards = [require_access]

    @post(opt=access(Role.DEVELOPER), summary="Run an agent on a thread", responses=_RUN_OR_STREAM)
    async def create_run(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        thread_id: FromPath[str],
        data: JSONBody[RunCreate],
    ) -> Response[Any]:
        """Queue a run (executed by a worker); with `stream: true` the answer is the run's events as SSE."""
        run = await service.create_run(
            db_session,
            scope=tenant,
            actor=actor,
            thread_id=thread_id,
            data=data,
            check_model=model_check(request, tenant),
            jobs=jobs_for(request.app.state),
            admission=request.app.state.gateway.admission,
        )
        return _run_or_stream(request, tenant, run, data.stream, HTTP_201_CREATED)

    @get(opt=access(Role.VIEWER), summary="List a thread's runs")
    async def list_runs(
        self, db_session: DbSession, tenant: CurrentTenant, thread_id: FromPath[str], page: PageParams
    ) -> Page[RunPublic]:
        return await service.list_runs(db_session, scope=tenant, thread_id=thread_id, params=page)

    @get("/{run_id:str}", opt=access(Role.VIEWER), summary="Get a run")
    async def get_run(
        self, db_session: DbSession, tenant: CurrentTenant, thread_id: FromPath[str], run_id: FromPath[str]
    ) -> RunPublic:
        """The run's status, required action, errors, and its total tokens and chip-microseconds."""
        return await service.get_run(db_session, scope=tenant, thread_id=thread_id, run_id=run_id)

    @get("/{run_id:str}/steps", opt=access(Role.VIEWER), summary="List a run's steps")
    async def list_run_steps(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        thread_id: FromPath[str],
        run_id: FromPath[str],
        page: PageParams,
    ) -> Page[StepPublic]:
        """Model calls and tool calls with timings, tokens and chip-microseconds."""
        return await service.list_steps(db_session, scope=tenant, thread_id=thread_id, run_id=run_id, params=page)

    @get(
        "/{run_id:str}/events",
        opt=access(Role.VIEWER),
        summary="Stream a run's events (SSE)",
        media_type="text/event-stream",
        responses=_EVENTS,
    )
    async def stream_run_events(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        thread_id: FromPath[str],
        run_id: FromPath[str],
        starting_after: Annotated[
            int | None,
            QueryParameter(ge=0, le=MAX_STORED_INTEGER, description="Replay events after this sequence number."),
        ] = None,
        last_event_id: Annotated[
            str | None, HeaderParameter(name="last-event-id", description="Resume after this event id (SSE).")
        ] = None,
    ) -> Stream:
        """Stored events replayed, then live ones, until the run ends or waits for the client (`event: done`)."""
        await service.run_row(db_session, tenant, thread_id, run_id)
        after = starting_after
        if after is None and last_event_id:
            after = stored_integer(last_event_id.strip(), param="last-event-id", minimum=0)
        return _stream(request, tenant, run_id, after or 0)

    @post("/{run_id:str}/cancel", opt=access(Role.DEVELOPER), status_code=HTTP_200_OK, summary="Cancel a run")
    async def cancel_run(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        thread_id: FromPath[str],
        run_id: FromPath[str],
    ) -> RunPublic:
        """Idempotent. A run no live worker holds (queued, waiting, or its worker gone) is cancelled at once; a
        running one shows `cancelling` until its worker stops at the next step."""
        return await service.cancel_run(
            db_session,
            scope=tenant,
            actor=actor,
            thread_id=thread_id,
            run_id=run_id,
            jobs=jobs_for(request.app.state),
        )

    @post(
        "/{run_id:str}/submit_tool_outputs",
        opt=access(Role.DEVELOPER),
        status_code=HTTP_200_OK,
        summary="Submit function tool outputs",
        responses=answers(
            HTTP_200_OK,
            "The run; with `stream: true` its further events as server-sent events.",
            {"application/json": RunPublic, "text/event-stream": RunEvent},
        ),
    )
    async def submit_tool_outputs(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        thread_id: FromPath[str],
        run_id: FromPath[str],
        data: JSONBody[SubmitToolOutputs],
    ) -> Response[Any]:
        """The outputs of every pending function call at once; the run continues on a worker."""
        after = await _last_sequence(request, tenant, run_id) if data.stream else 0
        run = await service.submit_tool_outputs(
            db_session,
            scope=tenant,
            actor=actor,
            thread_id=thread_id,
            run_id=run_id,
            data=data,
            jobs=jobs_for(request.app.state),
        )
        return _run_or_stream(request, tenant, run, data.stream, HTTP_200_OK, after)

    @post(
        "/{run_id:str}/approvals",
        opt=access(Role.DEVELOPER),
        status_code=HTTP_200_OK,
        summary="Approve or deny tool calls",
    )
    async def submit_approvals(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        thread_id: FromPath[str],
        run_id: FromPath[str],
        data: JSONBody[SubmitApprovals],
    ) -> RunPublic:
        """A decision for every call awaiting approval (audited); denied calls are never executed."""
        run = await service.submit_approvals(
            db_session,
            scope=tenant,
            actor=actor,
            thread_id=thread_id,
            run_id=run_id,
            data=data,
            jobs=jobs_for(request.app.state),
        )
        return RunPublic.of(run)


class ThreadAndRunController(Controller):
    path = "/v1/runs"
    tags = ["Runs"]
    guards = [require_access]

    @post(
        opt=access(Role.DEVELOPER),
        summary="Create a thread and run an agent on it",
        responses=_RUN_OR_STREAM,
        raises=[NotFound],
    )
    async def create_thread_and_run(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        data: JSONBody[ThreadAndRunCreate],
    ) -> Response[Any]:
        thread_data = data.thread or ThreadCreate()
        run_data = RunCreate.model_validate(data.model_dump(exclude={"thread"}))
        await service.admit_run(  # before the thread is written (429/402 store nothing)
            db_session,
            scope=tenant,
            actor=actor,
            agent_id=run_data.agent_id,
            agent_version=run_data.agent_version,
            thread_id=None,
            new_messages=thread_data.messages,
            check_model=model_check(request, tenant),
            admission=request.app.state.gateway.admission,
        )
        thread = await create_thread(db_session, scope=tenant, actor=actor, data=thread_data)
        run = await service.create_run(
            db_session,
            scope=tenant,
            actor=actor,
            thread_id=thread.id,
            data=run_data,
            check_model=model_check(request, tenant),
            jobs=jobs_for(request.app.state),
            admission=None,
        )
        return _run_or_stream(request, tenant, run, data.stream, HTTP_201_CREATED)
