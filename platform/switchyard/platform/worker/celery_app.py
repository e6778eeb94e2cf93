"""The Celery application, configured from settings: a SQLite broker by default, Redis or RabbitMQ in production.

Delivery is at-least-once (``task_acks_late`` + ``task_reject_on_worker_lost``, prefetch 1): every task must be
idempotent, and each says what happens on redelivery.
"""

from __future__ import annotations

from celery import Celery

from switchyard.platform.settings import Settings, load_settings
from switchyard.platform.worker.schedule import BEAT_SCHEDULE

__all__ = ["TASK_PACKAGES", "create_celery"]

TASK_PACKAGES = ["switchyard.platform.worker", "switchyard.platform.billing", "switchyard.platform.runs"]
"""Packages whose ``tasks`` module defines jobs; named, not imported, so the worker depends on no domain."""


def create_celery(settings: Settings | None = None) -> Celery:
    settings = settings or load_settings()
    if settings.broker_url.startswith("sqla+sqlite") or settings.result_backend.startswith("db+sqlite"):
        settings.ensure_data_dir()
    app = Celery("switchyard", broker=settings.broker_url, backend=settings.result_backend)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        timezone="UTC",
        enable_utc=True,
        result_expires=3600,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    app.conf.switchyard_settings = settings
    app.autodiscover_tasks(TASK_PACKAGES, related_name="tasks", force=True)
    app.conf.beat_schedule = dict(BEAT_SCHEDULE)
    return app
