"""Waiting for a started process's HTTP server to answer ``/healthz``."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import httpx


def wait_healthy(
    url: str, *, timeout_s: float = 90.0, process: subprocess.Popen[Any] | None = None, log: Path | None = None
) -> None:
    """Return once ``{url}/healthz`` answers 200; fail naming the wait after ``timeout_s`` (a process starting on a
    loaded machine takes tens of seconds, a count of short tries is no deadline), or at once if ``process`` has
    exited (with its ``log``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            output = log.read_text() if log is not None else ""
            raise AssertionError(f"the process serving {url} exited with {process.returncode}\n{output}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url}/healthz did not answer 200 within {timeout_s:g} s")
        time.sleep(0.1)
