"""Sending jobs to the workers from an API process: one Celery app per process, connected on first use (a
process that never sends a job never touches the broker)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from switchyard.platform.settings import Settings

__all__ = ["TaskSender", "task_sender_for"]


class TaskSender:
    """Sends Celery tasks by name to the broker of ``settings``."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._app: Any = None

    def send(self, task: str, args: Sequence[Any] = ()) -> None:
        if self._app is None:
            # imported on first use: the Celery app names every task package, which import the domains
            from switchyard.platform.worker.celery_app import create_celery

            self._app = create_celery(self._settings)
        self._app.send_task(task, args=list(args))


def task_sender_for(state: Any) -> TaskSender:
    """The app's sender (``state.task_sender``), created on first use from ``state.settings``."""
    sender: TaskSender | None = getattr(state, "task_sender", None)
    if sender is None:
        sender = TaskSender(state.settings)
        state.task_sender = sender
    return sender
