"""Celery beat's schedule: every periodic job of the platform, by task name (seconds between runs).

Exactly one beat runs per installation (`switchyard beat`, or the embedded worker of `switchyard up`). Each job is
idempotent, so a run that overlaps the previous one or repeats after a restart changes nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BEAT_SCHEDULE"]

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # re-enqueue usage events still pending, expire budget holds never settled
    "billing-sweep": {"task": "billing.sweep", "schedule": 60},
    # recompute the hourly/daily usage roll-ups of recent events (catches lost aggregate jobs)
    "billing-aggregate-recent": {"task": "billing.aggregate", "schedule": 600},
    # finalize invoices whose month ended more than the grace period ago
    "billing-finalize-invoices": {"task": "billing.finalize_invoices", "schedule": 3600},
    # re-enqueue runs whose worker died (lease passed) or that were never picked up; expire stale waits
    "runs-sweep": {"task": "runs.sweep", "schedule": 15},
}
