"""The kept PostgreSQL connection of ``db.direct`` gives up on a server that does not answer, and is not opened
again once its database is disposed."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import psycopg
import pytest

from switchyard.platform.db.direct import DirectWriter


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port whose connections the kernel accepts and nobody answers (a server frozen, a network black hole)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


async def test_a_server_that_never_answers_fails_the_write_within_the_connect_timeout(silent_server: int) -> None:
    writer = DirectWriter(
        f"postgresql://postgres@127.0.0.1:{silent_server}/switchyard", options="", connect_timeout_s=2
    )
    with pytest.raises(psycopg.OperationalError):  # without a connect timeout libpq would wait for ever
        await writer.insert("usage_events", [{"id": "use_1"}])
    await writer.close()


async def test_a_closed_writer_opens_no_connection_again(silent_server: int) -> None:
    """After its database is disposed a late write (a batch finishing at shutdown) raises, and its caller writes
    through a session, instead of opening a connection that nothing would close."""
    writer = DirectWriter(
        f"postgresql://postgres@127.0.0.1:{silent_server}/switchyard", options="", connect_timeout_s=2
    )
    await writer.close()
    with pytest.raises(RuntimeError, match="closed"):  # at once: the silent server would make a connect wait 2 s
        await writer.insert("usage_events", [{"id": "use_1"}])
