"""Celery beat's schedule: every periodic job of the platform, by task name (seconds between runs).

Exactly one beat runs per installation (`switchyard beat`, or the embedded worker of `switchyard up`). Each job is
idempotent, so a run that overlaps the previous one or repeats after a restart changes nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BEAT_SCHEDULE", "RECOVER_EVERY_S"]

RECOVER_EVERY_S = 2.0
"""How often ``runs.recover`` looks for runs whose worker died: a run resumes at most about this long after its
lease passed (one indexed query each time)."""

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # re-enqueue runs whose worker died (their lease passed), ahead of every queued run
    "runs-recover": {"task": "runs.recover", "schedule": RECOVER_EVERY_S},
    # re-enqueue responses whose process died (API process or worker: their lease passed)
    "responses-recover": {"task": "responses.recover", "schedule": RECOVER_EVERY_S},
    # send again the vector store files no worker is ingesting (worker died, set aside, lost send)
    "vector-stores-recover": {"task": "vector_stores.recover", "schedule": RECOVER_EVERY_S},
    # erase files whose expires_at passed (bytes, chunks, attachments: readers stopped seeing them at once)
    "files-expire": {"task": "files.expire", "schedule": 60},
    # re-enqueue runs never picked up (a lost dispatch, or behind another run of the thread); expire stale waits
    "runs-sweep": {"task": "runs.sweep", "schedule": 15},
    # re-enqueue usage events still pending, expire budget holds never settled
    "billing-sweep": {"task": "billing.sweep", "schedule": 60},
    # recompute the hourly/daily usage roll-ups of recent events (catches lost aggregate jobs)
    "billing-aggregate-recent": {"task": "billing.aggregate", "schedule": 600},
    # finalize invoices whose month ended more than the grace period ago
    "billing-finalize-invoices": {"task": "billing.finalize_invoices", "schedule": 3600},
}
