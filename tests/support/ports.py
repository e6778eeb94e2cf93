"""A port of 127.0.0.1 that nothing listens on (yet)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port free now: bound and released at once (a server started on it soon after gets it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
