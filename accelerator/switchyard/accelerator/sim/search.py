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
  dominated by a point already evaluated cannot reach the Pareto front; if a configuration of its fleet type (instance
  type, or prefill + decode types) already evaluated is also cheaper than its cost bound, it cannot be that type's
  cheapest either, so it is not simulated.
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
from dataclasses import asdict, astuple, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.metrics import summarize
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.search_space import (
    Configuration,
    Skipped,
    capacity_bound_rps,
    cost_per_million,
    fleet_usd_per_hour,
    ttft_floor_ms,
)
from switchyard.accelerator.sim.workloads import scale_rate

__all__ = [
    "ConfigResult",
    "Evaluator",
    "SearchProgress",
    "SearchResult",
    "SearchSettings",
    "Slo",
    "WaveEvaluator",
    "cache_key",
    "cheapest_per_fleet",
    "evaluate",
    "evaluate_json",
    "evaluation_args",
    "one_at_a_time",
    "pareto_front",
    "rank",
    "search",
    "workload_hash",
]

# Bump when a change to the search or the simulator changes results: cached evaluations of older versions are
# then ignored (the simulator has no version number of its own).
SEARCH_VERSION = 2


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
    """How hard the search looks: `requests` simulated per rate tried, bisection tolerance and step limit; and the
    assumed prices (USD per instance-hour, as decimal strings) of instance types the catalog does not price."""

    requests: int = 200
    tolerance: float = 0.05  # stop when the bracket is within this share of the highest passing rate
    max_steps: int = 12  # simulations per configuration at most
    seed: int = 0  # the routers' seed
    assumed_prices: tuple[tuple[str, str], ...] = ()

    def prices(self) -> dict[str, Decimal]:
        return {name: Decimal(usd) for name, usd in self.assumed_prices}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "assumed_prices": dict(self.assumed_prices)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SearchSettings:
        fields = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        fields["assumed_prices"] = tuple(sorted(d.get("assumed_prices", {}).items()))
        return cls(**fields)


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
    best_per_instance: dict[str, ConfigResult]  # by fleet type: "instance", or "prefill + decode" instances
    assumed_prices: dict[str, str] = field(
        default_factory=dict
    )  # USD per hour, of instances the catalog does not price

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
            "assumed_prices_usd_per_hour": self.assumed_prices,
            "evaluated": [r.to_dict() for r in self.evaluated],
        }


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
    runs = 0

    def meets_slo(rate_rps: float) -> bool:
        nonlocal runs
        runs += 1
        finished = config.fleet(settings.seed).run(scale_rate(requests, rate_rps / base_rps))
        served = [f for f in finished if f.rejected is None]
        decoded = [f.tpot_ms for f in served if f.output_tokens > 1]
        ttft = float(np.percentile([f.ttft_ms for f in served], slo.percentile)) if served else math.inf
        tpot = float(np.percentile(decoded, slo.percentile)) if decoded else 0.0
        return len(served) == len(finished) and ttft <= slo.ttft_ms and tpot <= slo.tpot_ms

    hi = capacity_bound_rps(config, requests)
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
    usd_per_hour = fleet_usd_per_hour(config, settings.prices())
    if lo == 0.0:
        return ConfigResult(config, 0.0, False, runs, usd_per_hour, None, 0.0, math.inf, math.inf)
    # The percentiles reported are summarize()'s, at the max rate.
    fleet = config.fleet(settings.seed)
    summary = summarize(fleet.run(scale_rate(requests, lo / base_rps)), fleet)
    mean_out = sum(r.output_tokens for r in requests) / len(requests)
    return ConfigResult(
        configuration=config,
        max_rate_rps=lo,
        rate_capped=capped,
        simulations=runs + 1,
        fleet_usd_per_hour=usd_per_hour,
        cost_per_million_tokens_usd=cost_per_million(usd_per_hour, lo, mean_out),
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
    ranked = sorted((r for r in results if r.feasible), key=rank)
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
        "configuration": config.identity(),
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
        reasons = sorted({s.reason for s in skipped})
        why = f" ({'; '.join(reasons[:3])}{'; ...' if len(reasons) > 3 else ''})" if reasons else ""
        raise ConfigurationError(f"no configuration to evaluate: every one was skipped{why}")
    if wave_size < 1:
        raise ConfigurationError(f"a wave holds at least one configuration (got {wave_size})")
    run_wave = evaluate_wave or one_at_a_time(evaluator)
    requests = list(workload[: settings.requests])
    sha = workload_hash(requests)
    mean_out = sum(r.output_tokens for r in requests) / len(requests)
    prices = settings.prices()
    bounds = [
        (cost_per_million(fleet_usd_per_hour(c, prices), capacity_bound_rps(c, requests), mean_out), i, c)
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
            if prune and _prunable(config, cost_floor, ttft_floor_ms(config, requests), results.values()):
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
        best_per_instance=cheapest_per_fleet(evaluated),
        assumed_prices=dict(settings.assumed_prices),
    )


def rank(r: ConfigResult) -> tuple[Decimal, float]:
    """Cheapest first, then fastest; infeasible results last."""
    cost = r.cost_per_million_tokens_usd
    return (Decimal("Infinity") if cost is None else cost, r.ttft_p90_ms)


def cheapest_per_fleet(results: Iterable[ConfigResult]) -> dict[str, ConfigResult]:
    """The cheapest (then fastest) feasible result per fleet type (`Configuration.fleet_name`), in first-seen order."""
    best: dict[str, ConfigResult] = {}
    for r in results:
        held = best.get(r.configuration.fleet_name)
        if r.feasible and (held is None or rank(r) < rank(held)):
            best[r.configuration.fleet_name] = r
    return best


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
        beaten_in_type = beaten_in_type or r.configuration.fleet_name == config.fleet_name
        if dominated and beaten_in_type:
            return True
    return False
