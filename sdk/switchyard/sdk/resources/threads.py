"""Threads, their messages, and runs of agents on them (with event streams that resume)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Unpack

from switchyard.sdk.base_client import Call
from switchyard.sdk.models import Deleted, Message, Run, RunStep, Thread
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.params import (
    ApprovalDecision,
    ListParams,
    MessageCreateParams,
    RunCreateParams,
    ThreadAndRunParams,
    ThreadCreateParams,
    ToolOutput,
)
from switchyard.sdk.resources.base import AsyncResource, SyncResource, segment
from switchyard.sdk.streaming import AsyncRunEventStream, RunCursor, RunEventStream

__all__ = ["AsyncMessages", "AsyncRuns", "AsyncThreads", "Messages", "Runs", "Threads"]


def _thread(thread_id: str, tail: str = "") -> str:
    return f"/threads/{segment(thread_id)}{tail}"


def _run(thread_id: str, run_id: str, tail: str = "") -> str:
    return _thread(thread_id, f"/runs/{segment(run_id)}{tail}")


def _events(thread_id: str, run_id: str, starting_after: int) -> Call:
    return Call("GET", _run(thread_id, run_id, "/events"), params={"starting_after": starting_after})


class Messages(SyncResource):
    def create(self, thread_id: str, **params: Unpack[MessageCreateParams]) -> Message:
        """Add a message (``role`` defaults to ``user``) to a thread with no active run."""
        return self._client.request(Call("POST", _thread(thread_id, "/messages"), body=params), Message)

    def list(self, thread_id: str, **params: Unpack[ListParams]) -> Page[Message]:
        return self._client.page(Call("GET", _thread(thread_id, "/messages"), params=params), Message)


class Runs(SyncResource):
    def create(self, thread_id: str, *, idempotency_key: str | None = None, **params: Unpack[RunCreateParams]) -> Run:
        """Queue a run of an agent on the thread; a worker executes it. See ``wait`` and ``stream``."""
        call = Call("POST", _thread(thread_id, "/runs"), body=params, idempotency_key=idempotency_key)
        return self._client.request(call, Run)

    def stream(self, thread_id: str, **params: Unpack[RunCreateParams]) -> RunEventStream:
        """Start a run and receive its events as they happen (until it finishes or needs you)."""
        call = Call("POST", _thread(thread_id, "/runs"), body={**params, "stream": True})
        return RunEventStream(self._client, call, RunCursor(thread_id, None))

    def events(self, thread_id: str, run_id: str, *, starting_after: int = 0) -> RunEventStream:
        """A run's events after ``starting_after``: the stored ones, then live ones."""
        cursor = RunCursor(thread_id, run_id, starting_after)
        return RunEventStream(self._client, _events(thread_id, run_id, starting_after), cursor)

    def wait(self, thread_id: str, run_id: str) -> Run:
        """Block until the run has finished or waits for tool outputs or approvals; the run as it is then."""
        for _ in self.events(thread_id, run_id):
            pass
        return self.retrieve(thread_id, run_id)

    def create_and_wait(self, thread_id: str, **params: Unpack[RunCreateParams]) -> Run:
        run = self.create(thread_id, **params)
        return self.wait(thread_id, run.id)

    def retrieve(self, thread_id: str, run_id: str) -> Run:
        return self._client.request(Call("GET", _run(thread_id, run_id)), Run)

    def list(self, thread_id: str, **params: Unpack[ListParams]) -> Page[Run]:
        return self._client.page(Call("GET", _thread(thread_id, "/runs"), params=params), Run)

    def steps(self, thread_id: str, run_id: str, **params: Unpack[ListParams]) -> Page[RunStep]:
        """The run's model calls and tool calls, with timings, tokens and chip-microseconds."""
        return self._client.page(Call("GET", _run(thread_id, run_id, "/steps"), params=params), RunStep)

    def cancel(self, thread_id: str, run_id: str) -> Run:
        """Cancel the run (idempotent); a running one shows ``cancelling`` until its worker stops."""
        return self._client.request(Call("POST", _run(thread_id, run_id, "/cancel")), Run)

    def submit_tool_outputs(self, thread_id: str, run_id: str, tool_outputs: Sequence[ToolOutput]) -> Run:
        """Answer the function calls of a run in ``requires_action``; it then goes on."""
        body = {"tool_outputs": list(tool_outputs)}
        return self._client.request(Call("POST", _run(thread_id, run_id, "/submit_tool_outputs"), body=body), Run)

    def submit_approvals(self, thread_id: str, run_id: str, approvals: Sequence[ApprovalDecision]) -> Run:
        """Approve or refuse the tool calls that need a human's approval."""
        body = {"approvals": list(approvals)}
        return self._client.request(Call("POST", _run(thread_id, run_id, "/approvals"), body=body), Run)


class Threads(SyncResource):
    def create(self, **params: Unpack[ThreadCreateParams]) -> Thread:
        return self._client.request(Call("POST", "/threads", body=params), Thread)

    def retrieve(self, thread_id: str) -> Thread:
        return self._client.request(Call("GET", _thread(thread_id)), Thread)

    def delete(self, thread_id: str) -> Deleted:
        return self._client.request(Call("DELETE", _thread(thread_id)), Deleted)

    def create_and_run(self, **params: Unpack[ThreadAndRunParams]) -> Run:
        """Create a thread (with ``thread.messages``) and queue a run on it, in one request."""
        return self._client.request(Call("POST", "/runs", body=params), Run)

    @cached_property
    def messages(self) -> Messages:
        return Messages(self._client)

    @cached_property
    def runs(self) -> Runs:
        return Runs(self._client)


class AsyncMessages(AsyncResource):
    async def create(self, thread_id: str, **params: Unpack[MessageCreateParams]) -> Message:
        return await self._client.request(Call("POST", _thread(thread_id, "/messages"), body=params), Message)

    async def list(self, thread_id: str, **params: Unpack[ListParams]) -> AsyncPage[Message]:
        return await self._client.page(Call("GET", _thread(thread_id, "/messages"), params=params), Message)


class AsyncRuns(AsyncResource):
    async def create(
        self, thread_id: str, *, idempotency_key: str | None = None, **params: Unpack[RunCreateParams]
    ) -> Run:
        call = Call("POST", _thread(thread_id, "/runs"), body=params, idempotency_key=idempotency_key)
        return await self._client.request(call, Run)

    def stream(self, thread_id: str, **params: Unpack[RunCreateParams]) -> AsyncRunEventStream:
        call = Call("POST", _thread(thread_id, "/runs"), body={**params, "stream": True})
        return AsyncRunEventStream(self._client, call, RunCursor(thread_id, None))

    def events(self, thread_id: str, run_id: str, *, starting_after: int = 0) -> AsyncRunEventStream:
        cursor = RunCursor(thread_id, run_id, starting_after)
        return AsyncRunEventStream(self._client, _events(thread_id, run_id, starting_after), cursor)

    async def wait(self, thread_id: str, run_id: str) -> Run:
        async for _ in self.events(thread_id, run_id):
            pass
        return await self.retrieve(thread_id, run_id)

    async def create_and_wait(self, thread_id: str, **params: Unpack[RunCreateParams]) -> Run:
        run = await self.create(thread_id, **params)
        return await self.wait(thread_id, run.id)

    async def retrieve(self, thread_id: str, run_id: str) -> Run:
        return await self._client.request(Call("GET", _run(thread_id, run_id)), Run)

    async def list(self, thread_id: str, **params: Unpack[ListParams]) -> AsyncPage[Run]:
        return await self._client.page(Call("GET", _thread(thread_id, "/runs"), params=params), Run)

    async def steps(self, thread_id: str, run_id: str, **params: Unpack[ListParams]) -> AsyncPage[RunStep]:
        return await self._client.page(Call("GET", _run(thread_id, run_id, "/steps"), params=params), RunStep)

    async def cancel(self, thread_id: str, run_id: str) -> Run:
        return await self._client.request(Call("POST", _run(thread_id, run_id, "/cancel")), Run)

    async def submit_tool_outputs(self, thread_id: str, run_id: str, tool_outputs: Sequence[ToolOutput]) -> Run:
        call = Call("POST", _run(thread_id, run_id, "/submit_tool_outputs"), body={"tool_outputs": list(tool_outputs)})
        return await self._client.request(call, Run)

    async def submit_approvals(self, thread_id: str, run_id: str, approvals: Sequence[ApprovalDecision]) -> Run:
        call = Call("POST", _run(thread_id, run_id, "/approvals"), body={"approvals": list(approvals)})
        return await self._client.request(call, Run)


class AsyncThreads(AsyncResource):
    async def create(self, **params: Unpack[ThreadCreateParams]) -> Thread:
        return await self._client.request(Call("POST", "/threads", body=params), Thread)

    async def retrieve(self, thread_id: str) -> Thread:
        return await self._client.request(Call("GET", _thread(thread_id)), Thread)

    async def delete(self, thread_id: str) -> Deleted:
        return await self._client.request(Call("DELETE", _thread(thread_id)), Deleted)

    async def create_and_run(self, **params: Unpack[ThreadAndRunParams]) -> Run:
        return await self._client.request(Call("POST", "/runs", body=params), Run)

    @cached_property
    def messages(self) -> AsyncMessages:
        return AsyncMessages(self._client)

    @cached_property
    def runs(self) -> AsyncRuns:
        return AsyncRuns(self._client)
