"""The database goes away under a running API (PostgreSQL through a TCP proxy the test can cut): requests answer
503 ``database_unavailable`` with ``retry-after`` (not 500), and the API serves again once it is back. A session
left idle inside a transaction is ended by the server, so a frozen process cannot hold its row locks forever."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

pytestmark = pytest.mark.postgres


class CuttableProxy:
    """A TCP proxy on 127.0.0.1 to ``target``; ``cut()`` drops every connection and refuses new ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.open = True
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def cut(self) -> None:
        self.open = False
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def restore(self) -> None:
        self.open = True

    def close(self) -> None:
        self.cut()
        self.listener.close()


@pytest.fixture
def proxied_database_url(postgres_database: str) -> Iterator[tuple[str, CuttableProxy]]:
    url = make_url(postgres_database)
    proxy = CuttableProxy((url.host or "127.0.0.1", url.port or 5432))
    yield url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False), proxy
    proxy.close()


async def test_requests_answer_503_while_the_database_is_away_and_recover(
    proxied_database_url: tuple[str, CuttableProxy], tmp_path: Any
) -> None:
    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.settings import Settings
    from switchyard.platform.tenants.service import create_operator_key

    url, proxy = proxied_database_url
    settings = Settings(data_dir=tmp_path / "data", database_url=url, time_scale=0, auth_cache_seconds=0)
    async with AsyncTestClient(app=create_app(settings), base_url="http://switchyard.test") as client:
        async with client.app.state.database.unit_of_work(UNSCOPED) as session:
            operator = await create_operator_key(session, actor=CLI_ACTOR, name="outage")
        headers = {"Authorization": f"Bearer {operator}"}
        assert (await client.get("/v1/admin/tenants", headers=headers)).status_code == 200

        proxy.cut()
        away = await client.get("/v1/admin/tenants", headers=headers)
        assert away.status_code == 503, away.text
        assert away.json()["error"]["code"] == "database_unavailable"
        assert away.headers["retry-after"] == "1"

        proxy.restore()
        back = await client.get("/v1/admin/tenants", headers=headers)
        assert back.status_code == 200, back.text


async def test_a_session_idle_inside_a_transaction_is_ended_by_the_server(postgres_database: str) -> None:
    from switchyard.platform.db import UNSCOPED, Database

    database = Database(postgres_database)
    try:
        async with database.unit_of_work(UNSCOPED) as session:
            setting = (await session.execute(text("SHOW idle_in_transaction_session_timeout"))).scalar_one()
    finally:
        await database.dispose()
    assert setting == "10s"


async def test_an_agent_model_call_without_its_database_is_interrupted_not_failed(
    proxied_database_url: tuple[str, CuttableProxy],
) -> None:
    """A run's model call whose budget check loses the database (it terminated the session) is interrupted: the
    run resumes later from its checkpoint instead of failing with ``model_error`` (seen in the system test)."""
    from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool
    from switchyard.agents import FunctionModel, Message, ModelCallInterrupted, ModelRequest
    from switchyard.platform.admission import admission_for
    from switchyard.platform.db import Database, TenantScope
    from switchyard.platform.execution.admitted import AdmittedModel
    from switchyard.platform.settings import Settings

    url, proxy = proxied_database_url
    database = Database(url)
    backend = AcceleratorPool.from_specs(DEFAULT_FLEET[:1], time_scale=0).backends()[0]
    model = AdmittedModel(
        FunctionModel(lambda _request: "never asked"),
        admission=admission_for(Settings(database_url=url, max_output_tokens=16), database),
        scope=TenantScope("ten_gone"),
        backend=backend,
        api_key_id=None,
        agent_id="agent_1",
    )
    proxy.cut()
    request = ModelRequest(request_id="step_1", model=backend.name, messages=[Message.user("hi")])
    try:
        with pytest.raises(ModelCallInterrupted, match="database was unavailable"):
            await model.request(request)
    finally:
        await database.dispose()
