"""CPU priority of the work that can wait: background jobs and password hashing yield the cores to interactive
requests on a host they share.

On a small host every process (API, fleet, workers, the database) shares a few cores, and the kernel's scheduler
splits them evenly unless told otherwise: one tenant's backlog of background jobs, or a flood of wrong passwords
(~155 ms of argon2 each), then slows every other tenant's chat completions. Work that has no client waiting on a
socket runs at a lower priority (a Unix *nice* increment): it still gets every core no one else wants, but a
request that is waited on goes first.
"""

from __future__ import annotations

import os
import sys

__all__ = ["lower_process_priority", "lower_thread_priority", "thread_niceness"]


def lower_process_priority(increment: int) -> None:
    """Lower this process's CPU priority by ``increment`` (0: unchanged); threads started afterwards inherit it.
    Call it before the process starts its threads."""
    if increment and hasattr(os, "nice"):
        os.nice(increment)


def lower_thread_priority(increment: int) -> None:
    """Lower the calling thread's CPU priority alone by ``increment`` (Linux, where niceness is per thread;
    elsewhere it would be the whole process's, so nothing is changed)."""
    if increment and sys.platform == "linux":
        os.setpriority(os.PRIO_PROCESS, 0, min(19, os.getpriority(os.PRIO_PROCESS, 0) + increment))


def thread_niceness() -> int:
    """The calling thread's niceness (Linux; elsewhere the process's)."""
    return os.getpriority(os.PRIO_PROCESS, 0)
