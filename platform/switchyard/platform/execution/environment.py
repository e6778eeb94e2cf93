"""What driving a run or a response needs, wherever it is driven: the database, the pool, admission, the lease
length, this process's identity as a lease holder, and test seams."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from switchyard.accelerator.pool import AcceleratorPool
from switchyard.agents import Model
from switchyard.platform.admission import Admission
from switchyard.platform.db import Database

__all__ = ["ModelFactory", "RunEnvironment", "worker_identity"]

ModelFactory = Callable[[str, str], Model]
"""``(tenant_id, session key) -> Model`` (the session key: a run's thread, a response's id): replaces the pool's model
(tests)."""


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class RunEnvironment:
    """What executing runs and responses needs: the database, the pool, admission, the lease length, and test
    seams."""

    database: Database
    pool: AcceleratorPool
    admission: Admission
    """Admits each model call as the gateway admits a request (the same limiters, through Redis when configured),
    waiting instead of refusing."""
    lease_s: float = 120.0
    worker_id: str = field(default_factory=worker_identity)
    model_factory: ModelFactory | None = None
    tool_options: dict[str, Any] = field(default_factory=dict)
    """Passed to ``build_tools`` (tests: ``resolver``, ``allow_loopback``)."""
    send_job: Callable[[str, Sequence[Any]], None] | None = None
    """``(job name, arguments)``: send a job (a worker: to the broker; the inline dispatcher: to this process);
    runs use it to start a thread's next queued run when one ends."""
    usage_committed: Callable[[], None] | None = None
    """Called after a checkpoint that committed model-call usage (workers: ask for its rating)."""
    worker: bool = False
    """A worker's environment: a model call that must wait puts its job aside instead of holding the worker slot
    (``AdmissionDeferred``), and each job taken counts as its tenant's turn (``execution/turns.py``)."""
