"""Start and stop the inference gateway of one API process (pool, admission, default rate cards)."""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from switchyard.accelerator.pool import AcceleratorPool, load_fleet, reload_fleet_process
from switchyard.platform.admission import admission_for
from switchyard.platform.billing.rates import ensure_default_rate_cards
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.inference.busy import FleetBusyRecorder
from switchyard.platform.inference.gateway import InferenceGateway
from switchyard.platform.inference.rating import RATE_EVENTS_TASK, RatingNudge
from switchyard.platform.jobs import enqueue, jobs_for
from switchyard.platform.observability.instrument import instrument_pool
from switchyard.platform.settings import Settings

__all__ = ["build_pool", "in_process_fleet_problem", "reload_pool", "start_gateway", "stop_gateway"]

log = logging.getLogger(__name__)


async def start_gateway(state: Any, settings: Settings, database: Database) -> InferenceGateway:
    specs = load_fleet(settings.fleet_file)
    async with database.unit_of_work(UNSCOPED) as session:
        await ensure_default_rate_cards(session, instance_types=sorted({s.instance for s in specs}))
    gateway = InferenceGateway(
        pool=build_pool(settings),
        database=database,
        settings=settings,
        admission=admission_for(settings, database),
        rating=RatingNudge(partial(enqueue, jobs_for(state), RATE_EVENTS_TASK)),
    )
    state.gateway = gateway
    state.started_at = time.time()
    state.busy_recorder = FleetBusyRecorder(database)
    state.busy_recorder.watch_pool(gateway.pool)
    state.busy_recorder.start()
    return gateway


def build_pool(settings: Settings) -> AcceleratorPool:
    """The pool described by the fleet file (or the default fleet); raises ConfigurationError when it is wrong.

    With ``SWITCHYARD_FLEET_URL`` set, ``trainium-sim`` deployments are the fleet process's; otherwise this process
    simulates them itself."""
    pool = AcceleratorPool.from_specs(
        load_fleet(settings.fleet_file),
        time_scale=settings.time_scale,
        fleet_url=settings.fleet_url or None,
        fleet_token=settings.fleet_token_value,
    )
    return instrument_pool(pool)  # a span and latency metrics per model call


def _server(url: str) -> str:
    scheme = url.partition(":")[0].partition("+")[0]
    names = {"postgresql": "PostgreSQL", "redis": "Redis", "rediss": "Redis", "amqp": "RabbitMQ", "amqps": "RabbitMQ"}
    return names.get(scheme, scheme)


def in_process_fleet_problem(settings: Settings) -> str | None:
    """Why an API process or worker with these settings must not start, or ``None``.

    Without ``SWITCHYARD_FLEET_URL`` a process simulates the ``trainium-sim`` deployments itself. That is right for
    one process (``switchyard up`` on SQLite and its SQLite broker starts a fleet process anyway); beside other
    processes on a shared database or broker each would simulate a fleet of its own, with replicas, queues and
    busy time no other process sees, and reconciliation would fail for good. ``SWITCHYARD_SIMULATE_IN_PROCESS``
    allows it explicitly (tests of one process)."""
    if settings.fleet_url or settings.simulate_in_process:
        return None
    shared = []
    if not settings.uses_sqlite:
        shared.append(f"{_server(settings.database_url)} database")
    if not settings.broker_url.startswith("sqla+sqlite"):  # `switchyard up`'s embedded broker is a SQLite file
        shared.append(f"{_server(settings.broker_url)} broker")
    if not shared or not any(spec.backend == "trainium-sim" for spec in load_fleet(settings.fleet_file)):
        return None
    return (
        f"SWITCHYARD_FLEET_URL is not set, so this process would simulate the trainium-sim fleet itself, beside the "
        f"other processes of its {' and '.join(shared)}: each would simulate a fleet of its own and reconciliation "
        "would fail. Run `switchyard fleet` once and set SWITCHYARD_FLEET_URL (and SWITCHYARD_FLEET_TOKEN) for every "
        "API process and worker, or use `switchyard up` for a single-machine installation."
    )


async def reload_pool(state: Any, pool: AcceleratorPool) -> None:
    """Serve from ``pool`` (after the fleet process, when there is one, has re-read the fleet file too); the old
    pool's busy time is recorded once its last request has finished."""
    settings: Settings = state.settings
    if settings.fleet_url:
        await reload_fleet_process(settings.fleet_url, settings.fleet_token_value)
    recorder: FleetBusyRecorder = state.busy_recorder
    recorder.watch_pool(pool)
    old = await state.gateway.reload(pool)
    await recorder.retire(old)


async def stop_gateway(state: Any) -> None:
    gateway: InferenceGateway = state.gateway
    await gateway.drain()
    if gateway.rating is not None:
        await gateway.rating.aclose()
    try:
        await state.busy_recorder.stop()
    except Exception:
        log.exception("could not record the last fleet busy time")
    await gateway.pool.aclose()
    await gateway.admission.aclose()
