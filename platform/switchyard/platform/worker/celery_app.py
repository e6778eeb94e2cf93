"""The Celery application, configured from settings: a SQLite broker by default, Redis or RabbitMQ in production.

Delivery is at-least-once (``task_acks_late`` + ``task_reject_on_worker_lost``, prefetch 1): every task must be
idempotent, and each says what happens on redelivery.

Jobs wait in four queues, so that recovering a crashed run never waits behind new runs or billing jobs:
``switchyard.recovery`` (``runs.recover`` and the ``runs.resume`` it sends), ``switchyard.maintenance`` (the other
periodic and billing jobs, ``system.ping``, anything unrouted), ``switchyard.runs`` (``runs.execute``) and
``switchyard.simulate`` (``simulate.evaluate``: an operator's configuration search, never a tenant's work). A worker
consumes them in that order: on Redis a free worker thread always takes the first non-empty queue, so a search's
backlog never delays a run that waits in the queues before it.
"""

from __future__ import annotations

from celery import Celery
from kombu.entity import Exchange, Queue
from kombu.transport import sqlalchemy as sqlite_broker

from switchyard.platform.observability.jobs import observe_jobs
from switchyard.platform.settings import Settings, load_settings
from switchyard.platform.worker.schedule import BEAT_SCHEDULE

__all__ = [
    "MAINTENANCE_QUEUE",
    "QUEUES",
    "RECOVERY_QUEUE",
    "RUNS_QUEUE",
    "SIMULATE_QUEUE",
    "SQLITE_BROKER_POLL_S",
    "TASK_PACKAGES",
    "create_celery",
    "declare_queues",
]

TASK_PACKAGES = [
    "switchyard.platform.worker",
    "switchyard.platform.billing",
    "switchyard.platform.runs",
    "switchyard.platform.responses",
    "switchyard.platform.background",
    "switchyard.platform.knowledge.vector_stores",
    "switchyard.platform.simulation",
]
"""Packages whose ``tasks`` module defines jobs; named, not imported, so the worker depends on no domain."""

RECOVERY_QUEUE = "switchyard.recovery"
MAINTENANCE_QUEUE = "switchyard.maintenance"
RUNS_QUEUE = "switchyard.runs"
SIMULATE_QUEUE = "switchyard.simulate"
QUEUES = (RECOVERY_QUEUE, MAINTENANCE_QUEUE, RUNS_QUEUE, SIMULATE_QUEUE)
"""Every queue, in the order a worker takes jobs from them (``switchyard worker --queues`` picks some)."""

TASK_ROUTES = {
    "runs.recover": {"queue": RECOVERY_QUEUE},
    "runs.resume": {"queue": RECOVERY_QUEUE},
    "runs.execute": {"queue": RUNS_QUEUE},
    "responses.recover": {"queue": RECOVERY_QUEUE},
    "responses.execute": {"queue": RUNS_QUEUE},
    "vector_stores.recover": {"queue": RECOVERY_QUEUE},
    "vector_stores.ingest": {"queue": RUNS_QUEUE},
    "simulate.evaluate": {"queue": SIMULATE_QUEUE},
}
"""Queues by task name; every other task goes to ``MAINTENANCE_QUEUE`` (the default queue)."""

SQLITE_BROKER_POLL_S = 0.1
"""How often a worker asks the SQLite broker for a message when its queues were empty. kombu's default, a second,
delayed the start of every agent run by up to a second per message (on `switchyard up` runs started 1.6-2.9 s after
they were created, 0.2-0.9 s at 0.1 on the same busy machine). Asking costs a query per queue: an idle `switchyard
up` uses 4 % of a core instead of 1 %."""


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
        task_default_queue=MAINTENANCE_QUEUE,
        task_routes=TASK_ROUTES,
    )
    if settings.broker_url.startswith("sqla+"):
        # read from the transport class only: its transport options all go to SQLAlchemy's create_engine, which
        # refuses this one
        sqlite_broker.Transport.polling_interval = SQLITE_BROKER_POLL_S
    if settings.broker_url.split("://", 1)[0] in ("redis", "rediss", "redis+socket", "sentinel"):
        # take from the queues in the order the worker lists them, not round-robin (the SQLite broker hands its
        # transport options to SQLAlchemy, which refuses this one)
        app.conf.broker_transport_options = {"queue_order_strategy": "priority"}
    app.conf.switchyard_settings = settings
    app.autodiscover_tasks(TASK_PACKAGES, related_name="tasks", force=True)
    app.conf.beat_schedule = dict(BEAT_SCHEDULE)
    observe_jobs()  # jobs sent stamped with their send time and trace; jobs run timed and traced
    return app


def declare_queues(app: Celery) -> None:
    """Create every queue on the broker now, before several processes use it: the SQLite broker stores a queue
    as a row made on first use, and two processes making it at once collide (kombu's get-or-create is not atomic)."""
    with app.connection_for_write() as connection:
        for name in QUEUES:
            Queue(name, Exchange(name), routing_key=name)(connection.default_channel).declare()
