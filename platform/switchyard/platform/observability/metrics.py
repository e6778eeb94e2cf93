"""Prometheus metrics of every Switchyard process, and their exposition.

Each process records into ``prometheus_client``'s default registry. Processes that share one port
(``switchyard api --workers N``) run in multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR`` names a directory each
of them writes its values to (set by the CLI before the processes start, see :func:`prepare_multiprocess_dir`)
and a scrape of any of them reads them all.

Values read at scrape time (the pool's queues, replicas and KV cache, usage events not yet rated) are not
stored: :func:`exposition` is handed a snapshot taken by the scraping process and renders it beside the
recorded metrics, so a scrape never shows a replica that no longer exists.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

__all__ = [
    "ADMISSION_REFUSALS",
    "CONTENT_TYPE_LATEST",
    "HTTP_REQUEST_SECONDS",
    "INFERENCE_CHIP_US",
    "INFERENCE_TOKENS",
    "JOBS",
    "JOB_LAG_SECONDS",
    "RUNS",
    "TIME_PER_OUTPUT_TOKEN_SECONDS",
    "TOOL_CALLS",
    "TTFT_SECONDS",
    "Snapshot",
    "exposition",
    "pool_snapshot",
    "prepare_multiprocess_dir",
]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# Latencies from a few ms (an instant upstream) to minutes (long agent generations).
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_PER_TOKEN_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0)

HTTP_REQUEST_SECONDS = Histogram(
    "switchyard_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response (streams included), by route template.",
    ["method", "route", "status"],
    buckets=_SECONDS,
)
TTFT_SECONDS = Histogram(
    "switchyard_inference_time_to_first_token_seconds",
    "Time to first token of model calls (queueing included; simulated time for trainium-sim models).",
    ["model"],
    buckets=_SECONDS,
)
TIME_PER_OUTPUT_TOKEN_SECONDS = Histogram(
    "switchyard_inference_time_per_output_token_seconds",
    "Decode time per output token after the first, per model call with two or more output tokens.",
    ["model"],
    buckets=_PER_TOKEN_SECONDS,
)
INFERENCE_TOKENS = Counter(
    "switchyard_inference_tokens",
    "Tokens of finished model calls, by model and kind (input, output).",
    ["model", "kind"],
)
INFERENCE_CHIP_US = Counter(
    "switchyard_inference_chip_microseconds",
    "Accelerator chip-microseconds attributed to finished model calls (what tenants are billed for).",
    ["model", "instance_type"],
)
ADMISSION_REFUSALS = Counter(
    "switchyard_admission_refusals",
    "Model calls refused at admission, by reason (the error code: rate_limit_exceeded, "
    "concurrency_limit_exceeded, budget_exceeded, limits_unavailable, ...) and caller (request: an API request, "
    "answered with the refusal; run: an agent run's model call, which waits and asks again when time cures it).",
    ["reason", "caller"],
)
RUNS = Counter(
    "switchyard_runs",
    "Agent run executions by outcome: the status a worker left the run in (completed, failed, cancelled, "
    "expired, incomplete, requires_action) or why it did not drive it (leased, finished, stale, ...).",
    ["outcome"],
)
TOOL_CALLS = Counter(
    "switchyard_tool_calls",
    "Tool calls executed by agent runs, by tool kind and result (ok, error).",
    ["kind", "result"],
)
JOB_LAG_SECONDS = Histogram(
    "switchyard_job_lag_seconds",
    "Time from a job's send to its start on a worker, by queue.",
    ["queue", "task"],
    buckets=_SECONDS,
)
JOBS = Counter(
    "switchyard_jobs", "Jobs run by workers, by task and final state (SUCCESS, FAILURE, RETRY, ...).", ["task", "state"]
)


@dataclass
class Snapshot:
    """Values read at scrape time, rendered as gauges beside the recorded metrics."""

    pools: list[dict[str, Any]] = field(default_factory=list)
    """``AcceleratorPool.status()`` of the deployments this process simulates."""
    unrated_usage_events: int | None = None
    """Usage events recorded and not yet rated (``None``: not this process's to say)."""


class _SnapshotCollector(Collector):
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        yield from pool_snapshot(self.snapshot.pools)
        if self.snapshot.unrated_usage_events is not None:
            unrated = GaugeMetricFamily(
                "switchyard_usage_events_unrated", "Usage events recorded and not yet rated (billing lag)."
            )
            unrated.add_metric([], self.snapshot.unrated_usage_events)
            yield unrated


def pool_snapshot(deployments: Iterable[dict[str, Any]]) -> list[Metric]:
    """Gauges of deployments' queues, running requests, replica utilisation and KV-cache use."""
    queued = GaugeMetricFamily(
        "switchyard_pool_queued_requests", "Requests waiting for a replica, by deployment.", labels=["model"]
    )
    running = GaugeMetricFamily(
        "switchyard_pool_running_requests", "Requests being served, by deployment.", labels=["model"]
    )
    busy = GaugeMetricFamily(
        "switchyard_replica_busy_ratio",
        "Fraction of time a replica has been busy since its start.",
        labels=["model", "replica", "instance_type"],
    )
    kv = GaugeMetricFamily(
        "switchyard_replica_kv_cache_used_ratio",
        "Fraction of a replica's KV-cache blocks in use.",
        labels=["model", "replica", "instance_type"],
    )
    for deployment in deployments:
        model = str(deployment.get("model", ""))
        instance = str(deployment.get("instance_type", ""))
        if "queued" in deployment:
            queued.add_metric([model], float(deployment["queued"]))
        if "running" in deployment:
            running.add_metric([model], float(deployment["running"]))
        for replica in deployment.get("replicas") or []:
            labels = [model, str(replica.get("replica", "")), instance]
            if "busy_fraction" in replica:
                busy.add_metric(labels, float(replica["busy_fraction"]))
            if "kv_used_fraction" in replica:
                kv.add_metric(labels, float(replica["kv_used_fraction"]))
    return [queued, running, busy, kv]


def exposition(snapshot: Snapshot | None = None) -> bytes:
    """The text exposition of this process's metrics (every process's, in multiprocess mode) and ``snapshot``."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_Default())
    if snapshot is not None:
        registry.register(_SnapshotCollector(snapshot))
    return generate_latest(registry)


class _Default(Collector):
    """The default registry's metrics, inside a registry of the scrape's own."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def prepare_multiprocess_dir() -> str:
    """Point ``PROMETHEUS_MULTIPROC_DIR`` at an empty directory for processes about to share a port (a fresh
    temporary one unless the operator named one, which is emptied: values of an earlier run must not count)."""
    path = os.environ.get(MULTIPROC_ENV)
    if path:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path, exist_ok=True)
    else:
        path = tempfile.mkdtemp(prefix="switchyard-metrics-")
        os.environ[MULTIPROC_ENV] = path
    return path
