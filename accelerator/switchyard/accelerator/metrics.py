"""Fleet-level results of a trace run: latency percentiles, goodput, utilisation, chip-hours, cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from switchyard.accelerator.cluster import Cluster
from switchyard.accelerator.requests import FinishedRequest

__all__ = ["RunSummary", "summarize"]

CHIP_US_PER_HOUR = 3_600_000_000


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What an operator asks of a fleet run. Latencies in ms, rates per simulated second."""

    model: str
    instance: str
    replicas: int
    tp: int
    chips_per_replica: int
    policy: str
    coefficients_group: str
    requests: int
    rejected: int
    duration_s: float
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    e2e_ms: dict[str, float]
    queue_ms: dict[str, float]
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    slo_attainment: float
    goodput_requests_per_s: float
    utilisation: float  # share of provisioned replica time spent running iterations
    mean_batch: float  # sequences in an iteration, averaged over busy time
    preemptions: int
    chip_us: int  # busy chip-microseconds attributed to requests
    chip_hours: float  # provisioned: replicas x chips x duration
    busy_chip_hours: float
    cost_usd: Decimal | None
    cost_per_million_output_tokens_usd: Decimal | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("cost_usd", "cost_per_million_output_tokens_usd"):
            d[k] = None if d[k] is None else str(d[k])
        return d


def _pcts(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0}
    p50, p90, p99 = np.percentile(np.asarray(values, dtype=np.float64), [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99)}


def summarize(
    finished: Sequence[FinishedRequest],
    cluster: Cluster,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
) -> RunSummary:
    """Aggregate per-request results of `cluster` into a RunSummary."""
    served = [f for f in finished if f.rejected is None]
    start = min((f.arrival_s for f in finished), default=0.0)
    end = max((f.finish_s for f in finished), default=0.0)
    duration = max(end - start, 1e-9)
    out_tokens = sum(f.output_tokens for f in served)
    dep = cluster.deployment

    def ok(f: FinishedRequest) -> bool:
        return (slo_ttft_ms is None or f.ttft_ms <= slo_ttft_ms) and (slo_tpot_ms is None or f.tpot_ms <= slo_tpot_ms)

    good = sum(1 for f in served if ok(f))
    replicas = len(cluster.replicas)
    chip_hours = replicas * dep.chips * duration / 3600
    price = dep.instance.price_per_chip_hour()
    cost = None if price is None else (price * Decimal(repr(chip_hours))).quantize(Decimal("0.0001"))
    per_m = None
    if cost is not None and out_tokens:
        per_m = (cost * Decimal(1_000_000) / Decimal(out_tokens)).quantize(Decimal("0.0001"))
    chip_us = sum(f.chip_us for f in finished)
    return RunSummary(
        model=dep.model.name,
        instance=dep.instance.name,
        replicas=replicas,
        tp=dep.tp,
        chips_per_replica=dep.chips,
        policy=cluster.policy.value,
        coefficients_group=cluster.coefficients_group,
        requests=len(finished),
        rejected=len(finished) - len(served),
        duration_s=duration,
        output_tokens=out_tokens,
        output_tokens_per_s=out_tokens / duration,
        requests_per_s=len(served) / duration,
        ttft_ms=_pcts([f.ttft_ms for f in served]),
        tpot_ms=_pcts([f.tpot_ms for f in served if f.output_tokens > 1]),
        e2e_ms=_pcts([f.e2e_ms for f in served]),
        queue_ms=_pcts([f.queue_s * 1e3 for f in served]),
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        slo_attainment=good / len(served) if served else 0.0,
        goodput_requests_per_s=good / duration,
        utilisation=sum(r.busy_s for r in cluster.replicas) / (replicas * duration),
        mean_batch=sum(r.batch_seconds for r in cluster.replicas) / max(1e-12, sum(r.busy_s for r in cluster.replicas)),
        preemptions=sum(f.preemptions for f in finished),
        chip_us=chip_us,
        chip_hours=chip_hours,
        busy_chip_hours=chip_us / CHIP_US_PER_HOUR,
        cost_usd=cost,
        cost_per_million_output_tokens_usd=per_m,
    )
