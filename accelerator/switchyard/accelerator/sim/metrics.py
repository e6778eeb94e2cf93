"""Fleet-level results of a trace run: latency percentiles, goodput, utilisation, chip-hours, cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from switchyard.accelerator.sim.block_hashes import ideal_hit_rate
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.disaggregated import DisaggregatedCluster
from switchyard.accelerator.sim.requests import FinishedRequest, Request

__all__ = ["RunSummary", "percentiles", "prefix_hit_rate", "summarize"]

CHIP_US_PER_HOUR = 3_600_000_000


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What an operator asks of a fleet run. Latencies in ms, rates per simulated second."""

    model: str
    instance: str  # "a + b" for a disaggregated fleet (prefill pool + decode pool)
    replicas: int
    tp: int
    chips_per_replica: int
    chips: int  # every chip provisioned in the fleet
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
    # Prompt blocks and tokens served from the replicas' prefix caches, beside what one infinite cache shared by
    # every replica would serve ("ideal_blocks", "ideal_tokens"): shares of all prompt blocks / tokens. None when
    # the workload was not given to summarize().
    prefix_hit_rate: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("cost_usd", "cost_per_million_output_tokens_usd"):
            d[k] = None if d[k] is None else str(d[k])
        return d


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """The p50, p90 and p99 of ``values`` (all 0 when there are none)."""
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0}
    p50, p90, p99 = np.percentile(np.asarray(values, dtype=np.float64), [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99)}


def summarize(
    finished: Sequence[FinishedRequest],
    cluster: Cluster | DisaggregatedCluster,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    requests: Sequence[Request] | None = None,
) -> RunSummary:
    """Aggregate per-request results of a fleet (one pool, or a prefill + decode pair) into a RunSummary.

    Given the workload's `requests`, it also reports the prefix cache's hit rate beside its ceiling."""
    pools = [cluster] if isinstance(cluster, Cluster) else [cluster.prefill, cluster.decode]
    served = [f for f in finished if f.rejected is None]
    start = min((f.arrival_s for f in finished), default=0.0)
    end = max((f.finish_s for f in finished), default=0.0)
    duration = max(end - start, 1e-9)
    out_tokens = sum(f.output_tokens for f in served)
    dep = pools[0].deployment

    def ok(f: FinishedRequest) -> bool:
        return (slo_ttft_ms is None or f.ttft_ms <= slo_ttft_ms) and (slo_tpot_ms is None or f.tpot_ms <= slo_tpot_ms)

    good = sum(1 for f in served if ok(f))
    replicas = [r for p in pools for r in p.replicas]
    deps = [r.deployment or p.deployment for p in pools for r in p.replicas]
    chips = sum(d.chips for d in deps)
    prices = [d.instance.price_per_chip_hour() for d in deps]
    cost = None
    if all(price is not None for price in prices):
        usd = sum((Decimal(d.chips) * price for d, price in zip(deps, prices, strict=True) if price), Decimal(0))
        cost = (usd * Decimal(repr(duration / 3600))).quantize(Decimal("0.0001"))
    per_m = None
    if cost is not None and out_tokens:
        per_m = (cost * Decimal(1_000_000) / Decimal(out_tokens)).quantize(Decimal("0.0001"))
    chip_us = sum(f.chip_us for f in finished)
    busy = sum(r.busy_s for r in replicas)
    return RunSummary(
        model=dep.model.name,
        instance=" + ".join(dict.fromkeys(d.instance.name for d in deps)),
        replicas=len(replicas),
        tp=dep.tp,
        chips_per_replica=dep.chips,
        chips=chips,
        policy=pools[0].policy.value,
        coefficients_group=" + ".join(p.coefficients_group for p in pools),
        requests=len(finished),
        rejected=len(finished) - len(served),
        duration_s=duration,
        output_tokens=out_tokens,
        output_tokens_per_s=out_tokens / duration,
        requests_per_s=len(served) / duration,
        ttft_ms=percentiles([f.ttft_ms for f in served]),
        tpot_ms=percentiles([f.tpot_ms for f in served if f.output_tokens > 1]),
        e2e_ms=percentiles([f.e2e_ms for f in served]),
        queue_ms=percentiles([f.queue_s * 1e3 for f in served]),
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        slo_attainment=good / len(served) if served else 0.0,
        goodput_requests_per_s=good / duration,
        utilisation=busy / (len(replicas) * duration),
        mean_batch=sum(r.batch_seconds for r in replicas) / max(1e-12, busy),
        preemptions=sum(f.preemptions for f in finished),
        chip_us=chip_us,
        chip_hours=chips * duration / 3600,
        busy_chip_hours=chip_us / CHIP_US_PER_HOUR,
        cost_usd=cost,
        cost_per_million_output_tokens_usd=per_m,
        prefix_hit_rate=None if requests is None else prefix_hit_rate(served, requests),
    )


def prefix_hit_rate(served: Sequence[FinishedRequest], requests: Sequence[Request]) -> dict[str, float]:
    """Shares of the served requests' prompt blocks and tokens that came from a prefix cache, and the shares one
    infinite cache would have served on the whole workload."""
    by_id = {r.request_id: r for r in requests}
    blocks = sum(len(by_id[f.request_id].block_hashes) for f in served if f.request_id in by_id)
    tokens = sum(f.prompt_tokens for f in served)
    ideal = ideal_hit_rate(requests)
    return {
        "blocks": sum(f.cached_blocks for f in served) / blocks if blocks else 0.0,
        "tokens": sum(f.cached_tokens for f in served) / tokens if tokens else 0.0,
        "ideal_blocks": ideal.blocks,
        "ideal_tokens": ideal.tokens,
    }
