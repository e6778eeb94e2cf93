"""Server-sent events: a line decoder, and a run's event stream that resumes after a dropped connection.

The API numbers a run's events (``id: <sequence_number>``) and ends the stream with ``event: done`` once the
run has finished or waits for the client. When the connection drops before that, the stream reconnects to
``GET /threads/{thread_id}/runs/{run_id}/events?starting_after=<last number>``, so no event is lost or repeated.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from switchyard.sdk.base_client import BaseClient, Call
from switchyard.sdk.models import RunEvent
from switchyard.sdk.transport import AsyncTransport, SyncTransport

__all__ = ["AsyncRunEventStream", "RunEventStream", "SSEDecoder", "ServerSentEvent"]

C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str
    data: str
    id: str | None


class SSEDecoder:
    """Turns lines of a ``text/event-stream`` into events (comments such as ``: ping`` are skipped)."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def line(self, line: str) -> ServerSentEvent | None:
        """Feed one line (without its line break); returns an event when a blank line completes one."""
        if not line:
            if not self._data and not self._event:
                return None
            event = ServerSentEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None

    def events(self, lines: Iterable[str]) -> Iterator[ServerSentEvent]:
        for line in lines:
            event = self.line(line)
            if event is not None:
                yield event


class RunCursor:
    """Where a run's stream stands: the run, the last event received, and whether the stream is complete."""

    def __init__(self, thread_id: str, run_id: str | None, starting_after: int = 0) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.last_sequence_number = starting_after
        self.done = False

    def accept(self, sse: ServerSentEvent) -> RunEvent | None:
        """The run event in ``sse``; ``None`` for the final ``done`` (after which ``done`` is true)."""
        if sse.event == "done":
            self.done = True
            return None
        data: dict[str, Any] = json.loads(sse.data)
        number = int(data.get("sequence_number", sse.id or 0))
        if self.run_id is None and sse.event == "thread.run.created":
            self.run_id = str(data["id"])
        self.last_sequence_number = number
        return RunEvent(event=sse.event, sequence_number=number, data=data)

    def reconnect(self, error: httpx.TransportError | None, reconnects: int, max_retries: int) -> Call | None:
        """After the connection ended: ``None`` if the stream is complete, else the request that continues it
        after the last event received. Raises ``APIConnectionError`` when it cannot be continued."""
        if self.done:
            return None
        failure = error or httpx.RemoteProtocolError("the stream ended before its done event")
        if self.run_id is None or reconnects >= max_retries:
            raise BaseClient.transport_error(failure) from error
        path = f"/threads/{self.thread_id}/runs/{self.run_id}/events"
        return Call("GET", path, params={"starting_after": self.last_sequence_number})


class StreamState(Generic[C]):
    def __init__(self, client: C, call: Call, cursor: RunCursor) -> None:
        self._client = client
        self._call: Call | None = call
        self._cursor = cursor
        self._response: httpx.Response | None = None

    @property
    def run_id(self) -> str | None:
        """The run's id (for a stream that starts a run: known after its first event)."""
        return self._cursor.run_id


class RunEventStream(StreamState[SyncTransport]):
    """A run's events, in order, until the run finishes or waits for you; use it in a ``with`` block or loop
    over it to the end."""

    def __iter__(self) -> Iterator[RunEvent]:
        reconnects = 0
        while self._call is not None and not self._cursor.done:
            try:
                with self._client.open_stream(self._call) as response:
                    self._response = response
                    for sse in SSEDecoder().events(response.iter_lines()):
                        event = self._cursor.accept(sse)
                        if event is not None:
                            reconnects = 0
                            yield event
            except httpx.TransportError as error:
                self._call = self._cursor.reconnect(error, reconnects, self._client.max_retries)
            else:
                self._call = self._cursor.reconnect(None, reconnects, self._client.max_retries)
            reconnects += 1

    def close(self) -> None:
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> RunEventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRunEventStream(StreamState[AsyncTransport]):
    """The async ``RunEventStream``: ``async for event in stream``."""

    async def __aiter__(self) -> AsyncIterator[RunEvent]:
        reconnects = 0
        while self._call is not None and not self._cursor.done:
            try:
                async with self._client.open_stream(self._call) as response:
                    self._response = response
                    decoder = SSEDecoder()
                    async for line in response.aiter_lines():
                        sse = decoder.line(line)
                        event = None if sse is None else self._cursor.accept(sse)
                        if event is not None:
                            reconnects = 0
                            yield event
            except httpx.TransportError as error:
                self._call = self._cursor.reconnect(error, reconnects, self._client.max_retries)
            else:
                self._call = self._cursor.reconnect(None, reconnects, self._client.max_retries)
            reconnects += 1

    async def aclose(self) -> None:
        if self._response is not None:
            await self._response.aclose()

    async def __aenter__(self) -> AsyncRunEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
