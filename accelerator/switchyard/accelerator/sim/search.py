"""Configuration search (Vidur-Search): the cheapest fleet configuration that serves a workload within an SLO.

For every configuration (instance x TP x replicas x max batch x routing x weights) the search bisects over the
request rate for the highest rate at which the SLO holds, then prices the configuration at that rate.

- SLO (the percentile definition): at the `percentile`-th percentile over the requests, TTFT <= `ttft_ms` and
  TPOT <= `tpot_ms`; a run with a rejected request (longer than a replica's KV cache) misses it.
- Rate: the workload's first `requests` requests, their arrival times scaled (scale_rate) to the rate tried.
  Bisection between 0 and the configuration's capacity bound (capacity_bound_rps), to a relative `tolerance`.
- Cost: the fleet's price per hour (chips x the instance's price per chip-hour, as summarize() prices a run)
  over the output tokens it serves per hour at the max rate (max rate x the mean output length).
- Pruning: a configuration whose best possible point (its cost at the capacity bound, its TTFT lower bound) is
  dominated by a point already evaluated cannot reach the Pareto front; if a configuration of its instance type
  already evaluated is also cheaper than its cost bound, it cannot be that type's cheapest either, so it is not
  simulated.
- Waves: `search` hands the configurations, cheapest bound first, to a `WaveEvaluator` in waves of `wave_size`,
  pruning each configuration against every result back before its wave is sent. One at a time (the default) is
  the sequential search; larger waves run in parallel elsewhere (Celery workers) and prune less, but find the same
  Pareto front and cheapest configuration per instance: pruning only drops configurations that can be neither.
- Caching: `evaluate` is one pure function of (configuration, workload, SLO, settings); its results are stored
  under a hash of those inputs, so a re-run reads them instead of simulating. `evaluate_json` is the same function
  on JSON values (`evaluation_args`), for a worker in another process or on another machine.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, astuple, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import Deployment, Precision, make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hardware import get_instance
from switchyard.accelerator.sim.metrics import summarize
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.router import RoutingPolicy
from switchyard.accelerator.sim.stepcost import StepCost
from switchyard.accelerator.sim.workloads import scale_rate

__all__ = [
    "ConfigResult",
    "Configuration",
    "Evaluator",
    "SearchProgress",
    "SearchResult",
    "SearchSettings",
    "Skipped",
    "Slo",
    "WaveEvaluator",
    "cache_key",
    "capacity_bound_rps",
    "configuration_space",
    "evaluate",
    "evaluate_json",
    "evaluation_args",
    "fleet_usd_per_hour",
    "one_at_a_time",
    "pareto_front",
    "search",
    "ttft_floor_ms",
    "workload_hash",
]

# Bump when a change to the search or the simulator changes results: cached evaluations of older versions are
# then ignored (the simulator has no version number of its own).
SEARCH_VERSION = 1


@dataclass(frozen=True, slots=True)
class Configuration:
    """One fleet to evaluate: `replicas` copies of `model` at `tp` ranks on `instance`."""

    model: str
    instance: str
    tp: int
    replicas: int
    max_batch: int
    routing: str
    weights: str

    def deployment(self) -> Deployment:
        return make_deployment(self.model, self.instance, self.tp, self.weights)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Configuration:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Slo:
    """Percentile definition: the `percentile`-th percentile TTFT and TPOT are within their limits."""

    ttft_ms: float
    tpot_ms: float
    percentile: float = 90.0

    def to_dict(self) -> dict[str, Any]:
        return {"definition": "percentile", **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Slo:
        if d.get("definition", "percentile") != "percentile":
            raise ConfigurationError(f"unknown SLO definition {d['definition']!r}")
        return cls(d["ttft_ms"], d["tpot_ms"], d["percentile"])


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How hard the search looks: `requests` simulated per rate tried, bisection tolerance and step limit."""

    requests: int = 200
    tolerance: float = 0.05  # stop when the bracket is within this share of the highest passing rate
    max_steps: int = 12  # simulations per configuration at most
    seed: int = 0  # the routers' seed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SearchSettings:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Skipped:
    """A configuration of the space that was not evaluated, and why."""

    instance: str
    tp: int
    weights: str
    reason: str


@dataclass(frozen=True, slots=True)
class ConfigResult:
    """A configuration at its max rate. `max_rate_rps` is 0 when the SLO fails even at the lowest rate tried."""

    configuration: Configuration
    max_rate_rps: float
    rate_capped: bool  # the SLO still held at the capacity bound: the max rate is at least this
    simulations: int
    fleet_usd_per_hour: Decimal
    cost_per_million_tokens_usd: Decimal | None  # per million output tokens; None when no rate meets the SLO
    qps_per_dollar: float  # requests per second at the max rate per USD per hour of fleet
    ttft_p90_ms: float  # at the max rate (p90 whatever the SLO's percentile); inf when infeasible
    tpot_p90_ms: float

    @property
    def feasible(self) -> bool:
        return self.cost_per_million_tokens_usd is not None

    def to_dict(self) -> dict[str, Any]:
        cost = self.cost_per_million_tokens_usd
        return {
            **self.configuration.to_dict(),
            "max_rate_rps": self.max_rate_rps,
            "rate_capped": self.rate_capped,
            "simulations": self.simulations,
            "fleet_usd_per_hour": str(self.fleet_usd_per_hour),
            "cost_per_million_tokens_usd": None if cost is None else str(cost),
            "qps_per_dollar": self.qps_per_dollar,
            "ttft_p90_ms": self.ttft_p90_ms if self.feasible else None,
            "tpot_p90_ms": self.tpot_p90_ms if self.feasible else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConfigResult:
        cost = d["cost_per_million_tokens_usd"]
        return cls(
            configuration=Configuration.from_dict(d),
            max_rate_rps=d["max_rate_rps"],
            rate_capped=d["rate_capped"],
            simulations=d["simulations"],
            fleet_usd_per_hour=Decimal(d["fleet_usd_per_hour"]),
            cost_per_million_tokens_usd=None if cost is None else Decimal(cost),
            qps_per_dollar=d["qps_per_dollar"],
            ttft_p90_ms=math.inf if d["ttft_p90_ms"] is None else d["ttft_p90_ms"],
            tpot_p90_ms=math.inf if d["tpot_p90_ms"] is None else d["tpot_p90_ms"],
        )


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What a search found. `pareto`: cost per million tokens against TTFT p90, cheapest first."""

    model: str
    workload: dict[str, Any]
    slo: Slo
    configurations_evaluated: int  # simulated (or read from the cache)
    simulated: int  # configurations simulated in this run (the rest came from the cache)
    pruned: int
    skipped: list[Skipped]
    evaluated: list[ConfigResult]
    pareto: list[ConfigResult]
    best_per_instance: dict[str, ConfigResult]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "workload": self.workload,
            "slo": self.slo.to_dict(),
            "cost_basis": "fleet price per hour / output tokens per hour at the max rate",
            "configurations_evaluated": self.configurations_evaluated,
            "simulated": self.simulated,
            "pruned": self.pruned,
            "skipped": [asdict(s) for s in self.skipped],
            "pareto": [r.to_dict() for r in self.pareto],
            "best_per_instance": {k: r.to_dict() for k, r in self.best_per_instance.items()},
            "evaluated": [r.to_dict() for r in self.evaluated],
        }


def configuration_space(
    model: str,
    instances: Sequence[str],
    *,
    tps: Sequence[int] | None = None,
    replicas: Sequence[int] = (1,),
    max_batches: Sequence[int] = (64,),
    routings: Sequence[str] = (RoutingPolicy.LEAST_LOAD.value,),
    weights: Sequence[str] = (Precision.BF16.value,),
) -> tuple[list[Configuration], list[Skipped]]:
    """The cross product of the options, less what cannot run: unpriced instances, TP degrees the model cannot be
    split by or does not fit at (make_deployment's errors). `tps` None: every power of two up to the instance."""
    space: list[Configuration] = []
    skipped: list[Skipped] = []
    for name in instances:
        inst = get_instance(name)
        degrees = tps or [1 << k for k in range(inst.max_tp.bit_length()) if 1 << k <= inst.max_tp]
        for w in weights:
            for tp in degrees:
                if inst.price_usd_per_hour is None:
                    skipped.append(Skipped(name, tp, w, "no price"))
                    continue
                try:
                    make_deployment(model, inst, tp, w)
                except ConfigurationError as exc:
                    skipped.append(Skipped(name, tp, w, str(exc)))
                    continue
                space += [
                    Configuration(model, name, tp, r, b, RoutingPolicy(p).value, w)
                    for r in replicas
                    for b in max_batches
                    for p in routings
                ]
    return space, skipped


def fleet_usd_per_hour(config: Configuration) -> Decimal:
    """What the fleet costs per hour: its chips at the instance's price per chip-hour (summarize()'s pricing)."""
    dep = config.deployment()
    price = dep.instance.price_per_chip_hour()
    if price is None:
        raise ConfigurationError(f"{dep.instance.name} has no price")
    return Decimal(config.replicas * dep.chips) * price


def _cost_per_million(usd_per_hour: Decimal, rate_rps: float, mean_output_tokens: float) -> Decimal:
    tokens_per_hour = Decimal(repr(rate_rps * mean_output_tokens * 3600))
    return (usd_per_hour * Decimal(1_000_000) / tokens_per_hour).quantize(Decimal("0.0001"))


def capacity_bound_rps(config: Configuration, workload: Sequence[Request], settings: SearchSettings) -> float:
    """An upper bound on the requests per second the fleet serves: the least of its decode throughput at a full
    batch (a request holds a slot for at least one iteration per output token, and `max_batch` sequences per
    iteration time is the most sequence-iterations a second holds, since step time grows more slowly than the
    batch) and its prefill throughput at full chunks (`max_batched_tokens` prompt tokens an iteration) over the
    mean prompt. Contexts are taken as one token, so it errs high; prompts served from a prefix cache could beat
    it, and then the search reports the rate as capped.
    """
    dep = config.deployment()
    cost = StepCost(dep, coefficients_for(dep.instance)[1])
    n = min(settings.requests, len(workload))
    mean_in = sum(r.prompt_tokens for r in workload[:n]) / n
    mean_out = sum(r.output_tokens for r in workload[:n]) / n
    step_s = cost.iteration_s(0, 0.0, 0.0, [1] * config.max_batch)
    slots = config.max_batch / (mean_out * step_s)
    chunk = EngineConfig().max_batched_tokens
    prefill = chunk / (mean_in * cost.iteration_s(chunk, 0.0, 0.0, []))
    return config.replicas * min(slots, prefill)


def ttft_floor_ms(config: Configuration, workload: Sequence[Request], settings: SearchSettings) -> float:
    """A lower bound on the TTFT p90 (the Pareto front's axis) at any rate: the p90 over the requests of their first
    prefill chunk run alone (every term of an iteration only grows with company, smaller chunks and padding).
    Requests with block hashes might be served from a prefix cache, so only one token of theirs is counted."""
    dep = config.deployment()
    cost = StepCost(dep, coefficients_for(dep.instance)[1])
    budget = EngineConfig().max_batched_tokens
    floors = [
        cost.iteration_s(1 if r.block_hashes else min(r.prompt_tokens, budget), 0.0, 0.0, []) * 1e3
        for r in workload[: settings.requests]
    ]
    return float(np.percentile(floors, 90))


def evaluate(config: Configuration, workload: Sequence[Request], slo: Slo, settings: SearchSettings) -> ConfigResult:
    """The configuration's highest rate meeting the SLO (bisection) and its cost there. Pure: the same inputs give
    the same result, so it can run anywhere (a worker, or the cache)."""
    requests = list(workload[: settings.requests])
    if len(requests) < 2:
        raise ConfigurationError("a search needs at least two requests in the workload")
    span_s = requests[-1].arrival_s - requests[0].arrival_s
    if span_s <= 0:
        raise ConfigurationError("the workload's requests all arrive at once: a search needs their arrival rate")
    base_rps = (len(requests) - 1) / span_s
    dep = config.deployment()
    engine = EngineConfig(max_batch=config.max_batch)
    runs = 0

    def meets_slo(rate_rps: float) -> bool:
        nonlocal runs
        runs += 1
        cluster = Cluster(dep, config.replicas, config.routing, config=engine, seed=settings.seed)
        finished = cluster.run(scale_rate(requests, rate_rps / base_rps))
        served = [f for f in finished if f.rejected is None]
        decoded = [f.tpot_ms for f in served if f.output_tokens > 1]
        ttft = float(np.percentile([f.ttft_ms for f in served], slo.percentile)) if served else math.inf
        tpot = float(np.percentile(decoded, slo.percentile)) if decoded else 0.0
        return len(served) == len(finished) and ttft <= slo.ttft_ms and tpot <= slo.tpot_ms

    hi = capacity_bound_rps(config, requests, settings)
    lo = 0.0
    capped = meets_slo(hi)
    if capped:
        lo = hi
    while not capped and runs < settings.max_steps and (lo == 0.0 or hi - lo > settings.tolerance * lo):
        mid = (lo + hi) / 2
        if meets_slo(mid):
            lo = mid
        else:
            hi = mid
    usd_per_hour = fleet_usd_per_hour(config)
    if lo == 0.0:
        return ConfigResult(config, 0.0, False, runs, usd_per_hour, None, 0.0, math.inf, math.inf)
    # The percentiles reported are summarize()'s, at the max rate.
    cluster = Cluster(dep, config.replicas, config.routing, config=engine, seed=settings.seed)
    summary = summarize(cluster.run(scale_rate(requests, lo / base_rps)), cluster)
    mean_out = sum(r.output_tokens for r in requests) / len(requests)
    return ConfigResult(
        configuration=config,
        max_rate_rps=lo,
        rate_capped=capped,
        simulations=runs + 1,
        fleet_usd_per_hour=usd_per_hour,
        cost_per_million_tokens_usd=_cost_per_million(usd_per_hour, lo, mean_out),
        qps_per_dollar=lo / float(usd_per_hour),
        ttft_p90_ms=summary.ttft_ms["p90"],
        tpot_p90_ms=summary.tpot_ms["p90"],
    )


def evaluation_args(
    config: Configuration, workload: Sequence[Request], slo: Slo, settings: SearchSettings
) -> list[Any]:
    """`evaluate`'s arguments as JSON values (the workload cut to `settings.requests`), for `evaluate_json`. The
    settings carry `SEARCH_VERSION`, so a worker whose simulator gives other results refuses the job."""
    requests = [asdict(r) for r in workload[: settings.requests]]
    return [config.to_dict(), requests, slo.to_dict(), {**settings.to_dict(), "search_version": SEARCH_VERSION}]


def evaluate_json(
    configuration: dict[str, Any], requests: list[dict[str, Any]], slo: dict[str, Any], settings: dict[str, Any]
) -> dict[str, Any]:
    """`evaluate` on `evaluation_args`' JSON values, its result as `ConfigResult.to_dict()`: what a worker runs.
    JSON keeps every float exactly, so the result is the one a local `evaluate` gives."""
    if settings.get("search_version") != SEARCH_VERSION:
        raise ConfigurationError(
            f"the search is at version {settings.get('search_version')} and this simulator at {SEARCH_VERSION}: "
            "run the same Switchyard version where the search runs and on its workers"
        )
    workload = [Request(**{**r, "block_hashes": tuple(r.get("block_hashes", ()))}) for r in requests]
    config = Configuration.from_dict(configuration)
    return evaluate(config, workload, Slo.from_dict(slo), SearchSettings.from_dict(settings)).to_dict()


def pareto_front(results: Sequence[ConfigResult]) -> list[ConfigResult]:
    """The feasible results no other beats on both cost per million tokens and TTFT p90 (ties kept), cheapest
    first."""
    ranked = sorted((r for r in results if r.feasible), key=_rank)
    front: list[ConfigResult] = []
    for r in ranked:
        last = front[-1] if front else None
        if last is None or r.ttft_p90_ms < last.ttft_p90_ms or _same_point(r, last):
            front.append(r)
    return front


def _same_point(a: ConfigResult, b: ConfigResult) -> bool:
    return a.cost_per_million_tokens_usd == b.cost_per_million_tokens_usd and a.ttft_p90_ms == b.ttft_p90_ms


def workload_hash(requests: Sequence[Request]) -> str:
    """A content hash of the requests (every field), for cache keys."""
    return hashlib.sha256(json.dumps([astuple(r) for r in requests]).encode()).hexdigest()


def cache_key(config: Configuration, workload_sha: str, slo: Slo, settings: SearchSettings) -> str:
    """The name under which `evaluate(config, workload, slo, settings)` is cached."""
    inputs = {
        "version": SEARCH_VERSION,
        "configuration": asdict(config),
        "workload": workload_sha,
        "slo": asdict(slo),
        "settings": asdict(settings),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:32]


Evaluator = Callable[[Configuration, Sequence[Request], Slo, SearchSettings], ConfigResult]
"""Evaluates one configuration where the search runs (`evaluate`, or a stand-in in tests)."""


class WaveEvaluator(Protocol):
    """Evaluates a wave of configurations, possibly in parallel and elsewhere, and yields each one's result as it
    completes, in any order (each `ConfigResult.configuration` says whose it is)."""

    def __call__(
        self, configs: Sequence[Configuration], workload: Sequence[Request], slo: Slo, settings: SearchSettings
    ) -> Iterable[ConfigResult]: ...


def one_at_a_time(evaluator: Evaluator = evaluate) -> WaveEvaluator:
    """A `WaveEvaluator` that runs `evaluator` here on each configuration of the wave in turn."""

    def evaluate_wave(
        configs: Sequence[Configuration], workload: Sequence[Request], slo: Slo, settings: SearchSettings
    ) -> Iterable[ConfigResult]:
        return (evaluator(c, workload, slo, settings) for c in configs)

    return evaluate_wave


@dataclass(frozen=True, slots=True)
class SearchProgress:
    """Where a search stands after one more configuration was decided: `result` is its result (None: pruned),
    `cached` whether the result came from the cache, `wave` the number of the wave it was sent in (0: not sent)."""

    done: int  # configurations decided so far: evaluated (simulated or cached) or pruned
    total: int
    pruned: int
    wave: int
    result: ConfigResult | None
    cached: bool = False


def search(
    space: Sequence[Configuration],
    workload: Sequence[Request],
    slo: Slo,
    settings: SearchSettings = SearchSettings(),
    *,
    skipped: Sequence[Skipped] = (),
    workload_description: dict[str, Any] | None = None,
    cache_dir: Path | None = None,
    prune: bool = True,
    evaluator: Evaluator = evaluate,
    evaluate_wave: WaveEvaluator | None = None,
    wave_size: int = 1,
    on_progress: Callable[[SearchProgress], None] | None = None,
) -> SearchResult:
    """Evaluate the configurations cheapest capacity bound first, pruning those that can reach neither the Pareto
    front nor the cheapest of their instance type.

    `cache_dir`: read each configuration's result from there when present, store it there when simulated.
    `prune` False evaluates every configuration (to check that pruning loses nothing).
    `evaluate_wave` (default: `evaluator` here, one configuration at a time) evaluates up to `wave_size`
    configurations at once; each is pruned against the results back before its wave is sent. The Pareto front and
    the cheapest per instance do not depend on the waves; `evaluated` (kept in bound order, whatever order results
    come back in), `pruned` and `simulated` do. `on_progress` hears of every configuration decided.
    """
    if not space:
        raise ConfigurationError("no configuration to evaluate: every one was skipped")
    if wave_size < 1:
        raise ConfigurationError(f"a wave holds at least one configuration (got {wave_size})")
    run_wave = evaluate_wave or one_at_a_time(evaluator)
    requests = list(workload[: settings.requests])
    sha = workload_hash(requests)
    mean_out = sum(r.output_tokens for r in requests) / len(requests)
    bounds = [
        (_cost_per_million(fleet_usd_per_hour(c), capacity_bound_rps(c, requests, settings), mean_out), i, c)
        for i, c in enumerate(space)
    ]
    order = sorted(bounds, key=lambda b: (b[0], b[1]))
    results: dict[int, ConfigResult] = {}  # by position in `order`
    simulated = pruned = waves = 0

    def decided(result: ConfigResult | None, wave: int, cached: bool = False) -> None:
        if on_progress is not None:
            done = len(results) + pruned
            on_progress(SearchProgress(done, len(space), pruned, wave, result, cached))

    def cache_path(config: Configuration) -> Path | None:
        return None if cache_dir is None else cache_dir / f"{cache_key(config, sha, slo, settings)}.json"

    position = 0
    while position < len(order):
        wave: dict[Configuration, list[int]] = {}  # the positions of each configuration sent (the space may repeat)
        sent = 0
        while position < len(order) and sent < wave_size:
            cost_floor, _, config = order[position]
            position += 1
            if prune and _prunable(config, cost_floor, ttft_floor_ms(config, requests, settings), results.values()):
                pruned += 1
                decided(None, 0)
                continue
            path = cache_path(config)
            if path is not None and path.exists():
                results[position - 1] = ConfigResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
                decided(results[position - 1], 0, cached=True)
                continue
            wave.setdefault(config, []).append(position - 1)
            sent += 1
        if not sent:
            continue
        waves += 1
        configs = [c for c, positions in wave.items() for _ in positions]
        for result in run_wave(configs, requests, slo, settings):
            positions = wave.get(result.configuration)
            if not positions:
                raise ConfigurationError(f"a result for a configuration not sent in the wave: {result.configuration}")
            results[positions.pop(0)] = result
            simulated += 1
            path = cache_path(result.configuration)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
            decided(result, waves)
        missing = [c for c, positions in wave.items() if positions]
        if missing:
            raise ConfigurationError(f"no result came back for {len(missing)} configurations, e.g. {missing[0]}")
    evaluated = [results[k] for k in sorted(results)]
    best: dict[str, ConfigResult] = {}
    for r in evaluated:
        held = best.get(r.configuration.instance)
        if r.feasible and (held is None or _rank(r) < _rank(held)):
            best[r.configuration.instance] = r
    description = {
        **(workload_description or {}),
        "requests": len(requests),
        "mean_prompt_tokens": sum(r.prompt_tokens for r in requests) / len(requests),
        "mean_output_tokens": mean_out,
        "sha256": sha,
    }
    return SearchResult(
        model=space[0].model,
        workload=description,
        slo=slo,
        configurations_evaluated=len(evaluated),
        simulated=simulated,
        pruned=pruned,
        skipped=list(skipped),
        evaluated=evaluated,
        pareto=pareto_front(evaluated),
        best_per_instance=best,
    )


def _rank(r: ConfigResult) -> tuple[Decimal, float]:
    """Cheapest first, then fastest; infeasible results last."""
    cost = r.cost_per_million_tokens_usd
    return (Decimal("Infinity") if cost is None else cost, r.ttft_p90_ms)


def _prunable(config: Configuration, cost_floor: Decimal, ttft_floor: float, evaluated: Iterable[ConfigResult]) -> bool:
    """Whether an evaluated point is strictly better than the best `config` could do on both axes (so it cannot be
    on the Pareto front), and one of its instance type strictly cheaper than its cost floor (so it cannot be that
    type's cheapest either)."""
    dominated = beaten_in_type = False
    for r in evaluated:
        cost = r.cost_per_million_tokens_usd
        if cost is None or cost >= cost_floor:
            continue
        dominated = dominated or r.ttft_p90_ms < ttft_floor
        beaten_in_type = beaten_in_type or r.configuration.instance == config.instance
        if dominated and beaten_in_type:
            return True
    return False
