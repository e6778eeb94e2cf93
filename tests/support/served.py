"""An ASGI app (the API, a fleet server, an upstream, an MCP server) served by uvicorn on 127.0.0.1 in a thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def served(app: Any, port: int = 0, *, lifespan: str = "auto", timeout_s: float = 10.0) -> Iterator[str]:
    """``app`` listening on ``port`` (by default a free one) of 127.0.0.1 while the block runs; yields its base
    URL. ``lifespan="on"`` runs the app's startup and shutdown (the API's database and gateway)."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        assert thread.is_alive(), "the server stopped while starting"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def port_of(url: str) -> int:
    """The port of a URL ``served`` yields."""
    return int(url.rsplit(":", 1)[1])


async def client_left(receive: Any, seconds: float) -> bool:
    """For an ASGI app that answers slowly: wait ``seconds`` (reading ``receive``); whether its client went away
    meanwhile (then it should stop, as a real server stops generating)."""
    try:
        message = await asyncio.wait_for(receive(), seconds)
    except TimeoutError:
        return False
    return bool(message["type"] == "http.disconnect")
