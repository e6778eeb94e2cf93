"""Platform-level Celery tasks."""

from __future__ import annotations

import os
import socket
from typing import Any

from celery import shared_task

from switchyard.platform.priority import thread_niceness

__all__ = ["ping"]


@shared_task(name="system.ping")
def ping(payload: Any = None) -> dict[str, Any]:
    """Echo ``payload`` with the worker's identity and the CPU niceness of the thread that ran it; harmless on
    redelivery (no side effects)."""
    return {"payload": payload, "hostname": socket.gethostname(), "pid": os.getpid(), "nice": thread_niceness()}
