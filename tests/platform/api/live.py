"""The app served by uvicorn on 127.0.0.1 in a thread of the test process, for clients that need a real socket
(schemathesis, a browser)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from litestar import Litestar

from tests.support.served import served


@contextmanager
def serve(app: Litestar) -> Iterator[str]:
    """Run ``app`` (its lifespan too) until the block ends; yields its base URL."""
    with served(app, lifespan="on", timeout_s=30) as url:
        yield url
