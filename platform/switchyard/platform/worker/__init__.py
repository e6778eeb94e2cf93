"""Celery: the application factory and the platform's jobs."""

from __future__ import annotations

from switchyard.platform.worker.celery_app import QUEUES, create_celery

__all__ = ["QUEUES", "create_celery"]
