"""Turns on an API process's event loop, per tenant: one tenant's burst waits in its own line instead of slowing
every other tenant's requests.

An API process serves every tenant on one event loop, so a request's work there (its admission, its database
reads and writes, its answer) runs between the steps of every other request in flight. Ninety background
responses sent at once by one tenant are ~45 requests' work on each of two processes, and another tenant's chat
completion that arrives with them waits for most of it: hundreds of milliseconds. So a tenant's requests take
one of that tenant's turns (``SWITCHYARD_TENANT_LOOP_TURNS`` per process) before the route runs, and wait in the
tenant's own line, first come first served, while all of them are taken. Turns are the tenant's own, never a
shared pool: no tenant's requests wait for another's.

A turn rations the work on the loop, not time spent waiting elsewhere, so a request gives it back at the first of:
its model call handed to the accelerator pool (:func:`give_back_turn`, from the inference gateway), the start
of its response (a stream's tokens are not rationed), ``TURN_S`` after it took it (a request waiting on
something slow, an upload's body or a tool, does not hold up the tenant's other requests for long), and its
end. Requests without a tenant (the operator's, the console's pages, health checks) take no turn. More than
``WAITING_PER_TENANT`` requests of one tenant waiting on one process are refused (429 ``too_many_waiting``):
what a tenant can park on a process is bounded.

Kubernetes' API Priority and Fairness rations an API server's concurrency among flows in the same spirit.
"""

from __future__ import annotations

import asyncio
from collections import deque
from contextvars import ContextVar

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from switchyard.platform.http.errors import RateLimited

__all__ = ["TURN_S", "WAITING_PER_TENANT", "TakeLoopTurns", "Turns", "give_back_turn"]

TURN_S = 0.25
WAITING_PER_TENANT = 1_000

_current: ContextVar[Turn | None] = ContextVar("switchyard_loop_turn", default=None)


class Turn:
    """One request's turn: given back once, however many of its ends arrive."""

    __slots__ = ("_line", "_timer")

    def __init__(self, line: _Line) -> None:
        self._line: _Line | None = line
        self._timer = asyncio.get_running_loop().call_later(TURN_S, self.give_back)

    def give_back(self) -> None:
        if self._line is not None:
            line, self._line = self._line, None
            self._timer.cancel()
            line.give()


class _Line:
    """One tenant's turns on this process and the requests waiting for one."""

    __slots__ = ("free", "waiting")

    def __init__(self, turns: int) -> None:
        self.free = turns
        self.waiting: deque[asyncio.Future[None]] = deque()  # first come, first served

    def give(self) -> None:
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():  # handed straight to the next in line
                waiter.set_result(None)
                return
        self.free += 1


class Turns:
    """The turns of every tenant on this process (``turns`` each)."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self._lines: dict[str, _Line] = {}

    async def take(self, tenant_id: str) -> Turn:
        """A turn of ``tenant_id``'s, waiting in its line if need be; 429 past ``WAITING_PER_TENANT`` waiting."""
        line = self._lines.get(tenant_id)
        if line is None:
            line = self._lines[tenant_id] = _Line(self.turns)
        if line.free > 0:
            line.free -= 1
            return Turn(line)
        if len(line.waiting) >= WAITING_PER_TENANT:
            raise RateLimited(
                f"more than {WAITING_PER_TENANT} of this tenant's requests are waiting on one API process: "
                "send fewer at once",
                code="too_many_waiting",
                headers={"retry-after": "1"},
            )
        waiter = asyncio.get_running_loop().create_future()
        line.waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                line.give()  # handed a turn as the request went away: the next in line has it
            elif waiter in line.waiting:
                line.waiting.remove(waiter)
            raise
        return Turn(line)

    def waiting(self, tenant_id: str) -> int:
        line = self._lines.get(tenant_id)
        return len(line.waiting) if line is not None else 0

    def free(self, tenant_id: str) -> int:
        line = self._lines.get(tenant_id)
        return line.free if line is not None else self.turns


def give_back_turn() -> None:
    """Give back the current request's turn, if it holds one: its remaining wait is not work on the loop."""
    turn = _current.get()
    if turn is not None:
        turn.give_back()


class TakeLoopTurns(ASGIMiddleware):
    """Run a tenant's request in one of its turns (after authentication, which names the tenant)."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        principal = scope.get("user")
        tenant = getattr(getattr(principal, "scope", None), "tenant_id", None)
        if tenant is None:
            await next_app(scope, receive, send)
            return
        turns: Turns = scope["litestar_app"].state.loop_turns
        turn = await turns.take(tenant)
        token = _current.set(turn)

        async def send_giving_back(message: Message) -> None:
            if message["type"] == "http.response.start":
                turn.give_back()
            await send(message)

        try:
            await next_app(scope, receive, send_giving_back)
        finally:
            turn.give_back()
            _current.reset(token)
