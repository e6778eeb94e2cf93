"""Waiting for a started process's HTTP server to answer ``/healthz``."""

from __future__ import annotations

import time

import httpx


def wait_healthy(url: str, *, timeout_s: float = 90.0) -> None:
    """Return once ``{url}/healthz`` answers 200; fail naming the wait after ``timeout_s`` (a process starting on a
    loaded machine takes tens of seconds, a count of short tries is no deadline)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url}/healthz did not answer 200 within {timeout_s:g} s")
        time.sleep(0.1)
