"""A worker asked to stop drives nothing more: a run or response job it takes after SIGTERM (a message it had
already taken, a recovery's message) is sent back to the broker for another worker, not driven here for minutes
while the worker is meant to be stopping. Read back from the real broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from switchyard.platform.execution import worker
from switchyard.platform.runs.dispatch import EXECUTE_TASK, RESUME_TASK
from switchyard.platform.settings import Settings
from switchyard.platform.worker import create_celery
from switchyard.platform.worker.celery_app import RECOVERY_QUEUE
from tests.platform.test_jobs import sent


@pytest.fixture
def stopping(settings: Settings) -> Iterator[None]:
    app = create_celery(settings)
    app.set_current()
    worker._interrupt_runs()  # what Celery's worker_shutting_down (SIGTERM) calls
    try:
        yield
    finally:
        worker._stopping.clear()


def test_a_job_taken_while_the_worker_stops_is_sent_on_and_not_driven(settings: Settings, stopping: None) -> None:
    driven: list[str] = []

    async def drive() -> str:
        driven.append("run_1")
        return "completed"

    outcome = worker.run_in_worker(drive(), "ten_1", "run_1", resume=RESUME_TASK, later=EXECUTE_TASK)

    assert outcome == "interrupted"
    assert driven == []
    assert sent(settings, RECOVERY_QUEUE) == [(RESUME_TASK, ["ten_1", "run_1"])]
