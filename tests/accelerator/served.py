"""An ASGI app (a fleet server, an upstream) served by uvicorn on 127.0.0.1 in a thread, for one test."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def served(app: Any, port: int = 0) -> Iterator[str]:
    """``app`` listening on ``port`` (by default a free one) of 127.0.0.1 while the block runs; yields its base
    URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


async def client_left(receive: Any, seconds: float) -> bool:
    """For an ASGI app that answers slowly: wait ``seconds`` (reading ``receive``); whether its client went away
    meanwhile (then it should stop, as a real server stops generating)."""
    try:
        message = await asyncio.wait_for(receive(), seconds)
    except TimeoutError:
        return False
    return bool(message["type"] == "http.disconnect")
