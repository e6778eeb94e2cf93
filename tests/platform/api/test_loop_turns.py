"""A tenant's requests take turns on an API process's event loop (``http.loop_turns``): past its turns a tenant's
requests wait in its own line while another tenant's go straight through; a model call handed to the pool, a
response that starts and ``TURN_S`` give the turn back.

Against a real server (uvicorn on 127.0.0.1, in this process so that the test can read its lines) and raw sockets
where a request must be held mid-body: only a real connection can announce a body and withhold it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from switchyard.platform.app import create_app
from switchyard.platform.http import loop_turns
from switchyard.platform.http.errors import RateLimited
from switchyard.platform.http.loop_turns import Turns
from tests.support.operators import operator_key
from tests.support.served import port_of, served


@dataclass
class Tenant:
    id: str
    key: str


@dataclass
class Server:
    url: str
    app: Any
    a: Tenant
    b: Tenant

    def waiting(self, tenant: Tenant) -> int:
        turns: Turns = self.app.state.loop_turns
        return turns.waiting(tenant.id)


@pytest.fixture
def server(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """One turn a tenant, held until given back (no ``TURN_S`` backstop within a test's time), a slow model."""
    monkeypatch.setattr(loop_turns, "TURN_S", 600.0)
    app = create_app(settings.model_copy(update={"tenant_loop_turns": 1, "time_scale": 1.0}))
    with served(app, lifespan="on") as url:
        operator = operator_key(settings.database_url)
        a, b = (_tenant(url, operator, name) for name in ("bursty", "steady"))
        yield Server(url, app, a, b)


def _tenant(url: str, operator: str, name: str) -> Tenant:
    created = httpx.post(
        f"{url}/v1/admin/tenants", json={"name": name}, headers={"Authorization": f"Bearer {operator}"}
    )
    assert created.status_code == 201, created.text
    body = created.json()
    return Tenant(body["id"], body["owner_key"]["value"])


def _hold_mid_body(server: Server, tenant: Tenant) -> socket.socket:
    """A request of ``tenant``'s that announces a body and sends none yet: its route waits for it, in its turn."""
    sock = socket.create_connection(("127.0.0.1", port_of(server.url)))
    sock.sendall(
        f"POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {tenant.key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n".encode()
    )
    return sock


def _in_thread(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        result["response"] = call()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"not within 10 s: {what}")


def _models(server: Server, tenant: Tenant) -> httpx.Response:
    return httpx.get(f"{server.url}/v1/models", headers={"Authorization": f"Bearer {tenant.key}"}, timeout=30)


def test_a_tenants_requests_past_its_turns_wait_in_its_own_line_and_another_tenants_do_not(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _hold_mid_body(server, server.a)
    try:
        _until(lambda: server.app.state.loop_turns.free(server.a.id) == 0, "the held request takes A's turn")
        second, answer = _in_thread(lambda: _models(server, server.a))
        _until(lambda: server.waiting(server.a) == 1, "A's next request waits in A's line")

        assert _models(server, server.b).status_code == 200  # B's turns are B's own
        assert second.is_alive()
        assert server.waiting(server.a) == 1

        monkeypatch.setattr(loop_turns, "WAITING_PER_TENANT", 1)
        refused = _models(server, server.a)  # a line is bounded
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "too_many_waiting"
        assert refused.headers["retry-after"] == "1"

        held.sendall(b"{}")  # the held request ends (its answer: whatever creating an empty agent says)
        assert held.recv(65536).startswith(b"HTTP/1.1 4")
        second.join(timeout=10)
        assert answer["response"].status_code == 200
    finally:
        held.close()


def test_a_model_call_handed_to_the_pool_gives_its_turn_back(server: Server) -> None:
    """A chat completion that takes seconds on the (simulated) fleet does not hold its tenant's turn meanwhile."""
    gateway = server.app.state.gateway

    def slow_completion() -> httpx.Response:
        return httpx.post(
            f"{server.url}/v1/chat/completions",
            json={
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "messages": [{"role": "user", "content": "count"}],
                "max_tokens": 300,  # ~2 s at this time scale
                "ignore_eos": True,
            },
            headers={"Authorization": f"Bearer {server.a.key}"},
            timeout=60,
        )

    completion, answer = _in_thread(slow_completion)
    _until(lambda: gateway.running == 1, "the completion runs on the pool")
    assert _models(server, server.a).status_code == 200  # A's one turn is free again
    assert completion.is_alive()
    completion.join(timeout=60)
    assert answer["response"].status_code == 200, answer["response"].text


async def test_a_turn_goes_to_the_first_in_line_and_comes_back_by_itself_after_TURN_S(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop_turns, "TURN_S", 0.05)
    turns = Turns(1)
    first = await turns.take("a")
    later = [asyncio.create_task(turns.take("a")) for _ in range(2)]
    await asyncio.sleep(0)
    assert turns.waiting("a") == 2
    assert not any(task.done() for task in later)
    first.give_back()
    first.give_back()  # once only
    second = await asyncio.wait_for(later[0], 1)
    assert not later[1].done()
    assert turns.waiting("a") == 1
    third = await asyncio.wait_for(later[1], 1)  # ``second`` was never given back: TURN_S did it
    third.give_back()
    second.give_back()
    assert turns.free("a") == 1


async def test_a_request_that_leaves_the_line_passes_on_a_turn_it_was_handed() -> None:
    turns = Turns(1)
    first = await turns.take("a")
    leaving, staying = asyncio.create_task(turns.take("a")), asyncio.create_task(turns.take("a"))
    await asyncio.sleep(0)
    first.give_back()  # handed to ``leaving``, which is cancelled before it runs
    leaving.cancel()
    turn = await asyncio.wait_for(staying, 1)
    turn.give_back()
    assert turns.free("a") == 1
    assert turns.waiting("a") == 0


async def test_a_line_past_its_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_turns, "WAITING_PER_TENANT", 1)
    turns = Turns(1)
    await turns.take("a")
    waiting = asyncio.create_task(turns.take("a"))
    await asyncio.sleep(0)
    with pytest.raises(RateLimited, match="waiting on one API process"):
        await turns.take("a")
    assert (await turns.take("b")) is not None  # another tenant's line is its own
    waiting.cancel()
