"""Small real servers on 127.0.0.1 for what an installation will not do on demand: answer with scripted
failures, and cut a streamed answer after its first event."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    """Answers in the order given; records each request's method, path and headers."""

    answers: list[tuple[int, dict[str, str], Any]]
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    delay_s: float = 0.0


@contextmanager
def scripted_server(script: Scripted) -> Iterator[str]:
    """A server answering from ``script``; yields its base URL (``.../v1``)."""

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            script.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
            time.sleep(script.delay_s)
            status, headers, body = script.answers.pop(0)
            payload = json.dumps(body).encode()
            self.send_response(status)
            for name, value in {"content-type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = do_DELETE = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


class CuttingProxy:
    """A TCP proxy to ``upstream`` that drops the first server-sent-event stream right after its first event;
    every other byte passes through. ``requests`` lists the request lines clients sent."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.requests: list[str] = []
        self.cut = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        while data := _recv(client):
            self.requests += [m.decode() for m in re.findall(rb"(?:GET|POST|PATCH|DELETE) \S+", data)]
            upstream.sendall(data)
        _close(upstream)

    def _answers(self, upstream: socket.socket, client: socket.socket) -> None:
        held = b""
        while data := _recv(upstream):
            held += data
            if self.cut.is_set() or b"\r\n\r\n" not in held or b"text/event-stream" not in held:
                client.sendall(held)
                held = b""
                continue
            first = held.find(b"id: ", held.find(b"\r\n\r\n"))
            end = held.find(b"\n\n", first) if first >= 0 else -1
            if end >= 0:
                client.sendall(held[: end + 2])
                self.cut.set()
                break
        _close(client)
        _close(upstream)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
