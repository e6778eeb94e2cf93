"""Fixtures for the agents tests: a small real HTTP server on 127.0.0.1 (no outside traffic)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest


class _Handler(BaseHTTPRequestHandler):
    """Routes: /ok, /echo, /redirect?to=URL[&status=302], /loop, /big?n=BYTES, /slow?s=SECONDS, /count."""

    server: _TestServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        self.server.hits.append((self.command, parts.path, self.headers.get("Host", "")))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if parts.path == "/ok":
            self._send(200, b"hello", {"Content-Type": "text/plain"})
        elif parts.path == "/echo":
            self._send(200, f"{self.command} {self.headers.get('Host')} {body.decode()}".encode())
        elif parts.path == "/redirect":
            self._send(int(query.get("status", "302")), b"", {"Location": query["to"]})
        elif parts.path == "/loop":
            self._send(302, b"", {"Location": "/loop"})
        elif parts.path == "/big":
            self._send(200, b"x" * int(query.get("n", "2000000")))
        elif parts.path == "/slow":
            time.sleep(float(query.get("s", "2")))
            self._send(200, b"late")
        else:
            self._send(404, b"not found")

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()


class _TestServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits: list[tuple[str, str, str]] = []

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients that give up early (size and time caps) break the pipe on purpose

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@pytest.fixture(scope="session")
def http_server() -> Iterator[_TestServer]:
    """A real HTTP server on 127.0.0.1 with redirect, size and delay routes."""
    server = _TestServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
