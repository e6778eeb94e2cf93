"""Celery: the application factory and the platform's jobs."""

from __future__ import annotations

from switchyard.platform.worker.celery_app import create_celery

__all__ = ["create_celery"]
