"""A request body that never arrives: 408 ``request_timeout`` in the error envelope, then the connection closes.

Against a real server (uvicorn on 127.0.0.1) and raw sockets, since only a real connection can announce a
body and then withhold it.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from switchyard.platform.app import create_app
from tests.support.operators import operator_key

TIMEOUT_S = 0.5


@dataclass
class Server:
    port: int
    key: str  # a tenant owner's key


@pytest.fixture
def server(settings: Any) -> Iterator[Server]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(settings.model_copy(update={"request_body_timeout_seconds": TIMEOUT_S}))
    runner = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    for _ in range(500):
        if runner.started:
            break
        time.sleep(0.02)
    assert runner.started
    try:
        operator = operator_key(settings.database_url)
        created = httpx.post(
            f"http://127.0.0.1:{port}/v1/admin/tenants",
            json={"name": "slow clients"},
            headers={"Authorization": f"Bearer {operator}"},
        )
        assert created.status_code == 201, created.text
        yield Server(port, created.json()["owner_key"]["value"])
    finally:
        runner.should_exit = True
        thread.join(timeout=10)


def _request_head(server: Server, content_length: int, extra: str = "") -> bytes:
    return (
        f"POST /v1/members HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {server.key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {content_length}\r\n{extra}\r\n"
    ).encode()


def _read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    sock.settimeout(10 * TIMEOUT_S + 5)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (by its content-length) from a connection that stays open."""
    sock.settimeout(10)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(next(v for k, v in _headers(head).items() if k == "content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def _headers(head: bytes) -> dict[str, str]:
    return dict(line.lower().split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:])


def _status_and_body(raw: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body), _headers(head)


BODY = b'{"email": "slow@x.io", "role": "viewer"}'


@pytest.mark.parametrize("sent", [b"", BODY[:10]], ids=["no body", "half a body"])
@pytest.mark.parametrize("idempotency_key", [None, "slow-1"])
def test_a_body_that_never_arrives_is_408_and_the_connection_closes(
    server: Server, sent: bytes, idempotency_key: str | None
) -> None:
    extra = f"Idempotency-Key: {idempotency_key}\r\n" if idempotency_key else ""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_request_head(server, len(BODY), extra) + sent)
        status, body, headers = _status_and_body(_read_until_closed(sock))
    assert status == 408
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "request_timeout"
    assert "request body" in body["error"]["message"]
    assert headers["connection"] == "close"

    # nothing was created or claimed: the same request, sent whole, is a first request
    retry = httpx.post(
        f"http://127.0.0.1:{server.port}/v1/members",
        content=BODY,
        headers={"Authorization": f"Bearer {server.key}", "content-type": "application/json"}
        | ({"Idempotency-Key": idempotency_key} if idempotency_key else {}),
    )
    assert retry.status_code == 201, retry.text
    assert "idempotent-replayed" not in retry.headers


# alone: a byte sent just after the server answered and closed (a delay between the check and the send, which
# neighbouring tests on two cores make likely) resets the connection before the answer is read
@pytest.mark.alone
def test_a_trickled_body_does_not_extend_the_deadline(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_request_head(server, len(BODY)))
        for byte in BODY[:-1]:  # one byte at a time, together far longer than the deadline, until an answer
            sock.sendall(bytes([byte]))
            answered, _, _ = select.select([sock], [], [], TIMEOUT_S / 5)
            if answered:
                break
        status, body, _ = _status_and_body(_read_until_closed(sock))
    assert status == 408
    assert body["error"]["code"] == "request_timeout"


def test_a_body_sent_in_time_is_served_on_the_same_connection(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_request_head(server, len(BODY)))
        sock.sendall(BODY)
        assert _status_and_body(_read_response(sock))[0] == 201
        listing = f"GET /v1/members HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.key}\r\n\r\n".encode()
        sock.sendall(listing)
        status, body, _ = _status_and_body(_read_response(sock))
    assert status == 200
    assert body["data"][0]["email"] == "slow@x.io"
