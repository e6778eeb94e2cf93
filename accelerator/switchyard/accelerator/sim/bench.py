"""Bench mode: a serving benchmark's load on the continuous-batching engine, measured as the benchmark measures it.

Published serving benchmarks (llmperf, guidellm, vLLM's benchmark_serving, GenAI-Perf) drive a server in one of
two ways, with every prompt and output of one fixed length:

- closed loop (`concurrency` C): C requests in flight; the moment one finishes, the next is sent;
- open loop (`rate_per_s` R): requests sent at R per second, with Poisson or evenly spaced arrivals.

The first `warmup` requests to finish are left out of the statistics. Latencies are percentiles over the
measured requests: TTFT, ITL (a request's mean gap between output tokens after the first, as GenAI-Perf
reports it: the engine advances decode in multi-step stretches, not token by token) and end-to-end latency.
Throughput is over the measured span: from the first measured request's arrival to the last one's finish.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.costmodel import Coefficients
from switchyard.accelerator.sim.deployment import KvCacheDtype, Precision, make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hardware import Instance
from switchyard.accelerator.sim.metrics import percentiles
from switchyard.accelerator.sim.model_config import ModelConfig
from switchyard.accelerator.sim.requests import FinishedRequest, Request

__all__ = ["BenchResult", "closed_loop", "default_warmup", "open_loop", "open_loop_arrivals", "simulate_bench"]

# Stepping the engine just past an iteration's start runs that one iteration (engine.step_until's contract).
_TICK_S = 1e-9


@dataclass(frozen=True, slots=True)
class BenchResult:
    """What a serving benchmark reports. Latency percentiles ("p50", "p90", "p99") in ms; rates per second."""

    model: str
    instance: str
    tp: int
    chips: int
    weights: str
    kv_dtype: str
    expert_parallel: bool  # a mixture-of-experts model's experts whole on the ranks (else sliced TP ways)
    concurrency: int | None  # closed loop; None in open loop
    rate_per_s: float | None  # open loop; None in closed loop
    arrivals: str | None  # open loop: "poisson" or "constant"
    input_len: int
    output_len: int
    requests: int  # sent, warm-up included
    warmup: int
    measured: int
    rejected: int  # measured requests the replica could never run (longer than its KV cache)
    ttft_ms: dict[str, float]
    itl_ms: dict[str, float]
    e2e_ms: dict[str, float]
    output_tokens_per_s: float
    requests_per_s: float
    duration_s: float  # the measured span
    coefficients_group: str
    # speculative decoding as served (Speculation.to_dict: draft, tokens a step, acceptance rate); None: none
    speculation: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def closed_loop(
    cluster: Cluster, concurrency: int, requests: int, input_len: int, output_len: int
) -> list[FinishedRequest]:
    """Keep `concurrency` requests in flight until `requests` were sent; every request, in finishing order."""
    finished: list[FinishedRequest] = []
    sent = 0

    def send(at_s: float) -> None:
        nonlocal sent
        cluster.submit(Request(sent, at_s, input_len, output_len))
        sent += 1

    for _ in range(min(concurrency, requests)):
        send(0.0)
    while not cluster.idle:
        # One iteration at a time, so a finished request's successor arrives exactly at its finish.
        cluster.step_until(min(r.now for r in cluster.replicas) + _TICK_S)
        for done in cluster.collect():
            finished.append(done)
            if sent < requests:
                send(done.finish_s)
    return finished


def open_loop_arrivals(rate_per_s: float, requests: int, *, poisson: bool = True, seed: int = 0) -> list[float]:
    """Send times of `requests` requests at `rate_per_s`: exponential gaps (seeded) or even spacing, from t=0."""
    if poisson:
        rng = random.Random(seed)
        gaps = [rng.expovariate(rate_per_s) for _ in range(requests - 1)]
        return [0.0, *np.cumsum(gaps).tolist()]
    return [i / rate_per_s for i in range(requests)]


def open_loop(cluster: Cluster, arrivals: Sequence[float], input_len: int, output_len: int) -> list[FinishedRequest]:
    """Send one request at each arrival time regardless of progress; every request, in finishing order."""
    return cluster.run(Request(i, t, input_len, output_len) for i, t in enumerate(arrivals))


def default_warmup(requests: int, concurrency: int | None) -> int:
    """Closed loop: the concurrency, since the first wave arrives at once and prefills as one batch before
    arrivals settle into their steady stagger. Open loop: none. Never more than half the requests."""
    return min(concurrency or 0, requests // 2)


def simulate_bench(
    model: ModelConfig | str,
    instance: Instance | str,
    tp: int,
    *,
    requests: int,
    input_len: int,
    output_len: int,
    concurrency: int | None = None,
    rate_per_s: float | None = None,
    poisson: bool = True,
    seed: int = 0,
    warmup: int | None = None,
    weights: Precision | str = Precision.BF16,
    kv_dtype: KvCacheDtype | str = KvCacheDtype.BF16,
    config: EngineConfig | None = None,
    coefficients: Coefficients | None = None,
    expert_parallel: bool = False,
    draft_model: ModelConfig | str | None = None,
    num_speculative_tokens: int | None = None,
    acceptance_rate: float | None = None,
) -> BenchResult:
    """Run a closed-loop (`concurrency`) or open-loop (`rate_per_s`) benchmark on one replica and measure it.

    `warmup`: finished requests left out of the statistics (default: default_warmup()); `coefficients`: a cost
    model other than the instance's committed calibration (reported as group "custom"); `expert_parallel`: a
    mixture-of-experts model's experts placed whole on the `tp` ranks (make_deployment); `draft_model`,
    `num_speculative_tokens`, `acceptance_rate`: speculative decoding with a draft model, or a catalog pair's draft
    and tokens replaced (make_deployment).
    """
    if (concurrency is None) == (rate_per_s is None):
        raise ConfigurationError("give exactly one of concurrency (closed loop) or rate_per_s (open loop)")
    if concurrency is not None and concurrency < 1:
        raise ConfigurationError(f"concurrency must be at least 1, got {concurrency}")
    if rate_per_s is not None and not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ConfigurationError(f"rate_per_s must be a positive number, got {rate_per_s}")
    if requests < 1 or input_len < 1 or output_len < 1:
        raise ConfigurationError("requests, input_len and output_len must be positive")
    skip = default_warmup(requests, concurrency) if warmup is None else warmup
    if not 0 <= skip < requests:
        raise ConfigurationError(f"warmup must be in 0..{requests - 1} (fewer than the requests), got {skip}")
    dep = make_deployment(
        model,
        instance,
        tp,
        weights,
        kv_dtype=kv_dtype,
        expert_parallel=expert_parallel,
        draft_model=draft_model,
        num_speculative_tokens=num_speculative_tokens,
        acceptance_rate=acceptance_rate,
    )
    cluster = Cluster(dep, 1, config=config, coefficients=coefficients)
    if concurrency is not None:
        finished = closed_loop(cluster, concurrency, requests, input_len, output_len)
    else:
        assert rate_per_s is not None
        arrivals = open_loop_arrivals(rate_per_s, requests, poisson=poisson, seed=seed)
        finished = open_loop(cluster, arrivals, input_len, output_len)
    measured = finished[skip:]
    served = [f for f in measured if f.rejected is None]
    span_s = max(f.finish_s for f in measured) - min(f.arrival_s for f in measured)
    per_s = 1.0 / span_s if span_s > 0 else 0.0
    return BenchResult(
        model=dep.model.name,
        instance=dep.instance.name,
        tp=tp,
        chips=dep.chips,
        weights=dep.weights.value,
        kv_dtype=dep.kv_dtype.value,
        expert_parallel=dep.expert_parallel,
        concurrency=concurrency,
        rate_per_s=rate_per_s,
        arrivals=None if rate_per_s is None else ("poisson" if poisson else "constant"),
        input_len=input_len,
        output_len=output_len,
        requests=requests,
        warmup=skip,
        measured=len(measured),
        rejected=len(measured) - len(served),
        ttft_ms=percentiles([f.ttft_ms for f in served]),
        itl_ms=percentiles([f.tpot_ms for f in served]),
        e2e_ms=percentiles([f.e2e_ms for f in served]),
        output_tokens_per_s=sum(f.output_tokens for f in served) * per_s,
        requests_per_s=len(served) * per_s,
        duration_s=span_s,
        coefficients_group=cluster.coefficients_group,
        speculation=None if dep.speculation is None else dep.speculation.to_dict(),
    )
