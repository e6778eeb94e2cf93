"""Capacity planning on a tenant's recorded traffic: the configuration search (``sim/search.py``) over the workload
``traffic.recorded_workload`` read from the usage ledger, for the operator console's capacity page.

The question is the buyer's: what would this traffic cost on other hardware at the latency it gets today? So the
default TTFT objective is the p90 TTFT the recorded workload gets on the model's current deployment (the fleet
file's ``trainium-sim`` deployment of that model, simulated at the recorded rate, as if the tenant had it alone);
without one (an upstream model, or a model no longer served) it is ``DEFAULT_TTFT_MS``. The TPOT objective defaults
to ``DEFAULT_TPOT_MS``: a TPOT measured at one tenant's light load is a floor that no busier fleet meets. The
current deployment is the one the fleet serves (``fleet.simulated_deployment``), speculative decoding included, and
every configuration searched speculates as it does (the same draft, tokens and acceptance rate).

Bounded, because it runs in the API process that serves every tenant:

- the workload holds at most ``traffic.MAX_REQUESTS`` requests (an even sample past that);
- the space holds at most ``MAX_CONFIGURATIONS`` configurations (instances x TP degrees x replica counts);
- it runs on one thread of its own at a lower CPU priority (``SEARCH_NICE``), off the event loop, one search per
  process at a time (another is refused with ``CapacitySearchBusy``, not queued);
- it stops taking configurations after ``TIME_LIMIT_S`` seconds and answers with what it has (``complete`` False).

For searches larger than that, ``switchyard simulate search --workers celery`` runs on the workers.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any

from switchyard.accelerator.errors import ConfigurationError, SimulatorError, UnknownNameError
from switchyard.accelerator.pool.fleet import DeploymentSpec, load_fleet, model_aliases, simulated_deployment
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import Deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hardware import list_instances
from switchyard.accelerator.sim.metrics import summarize
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.search import (
    ConfigResult,
    SearchProgress,
    SearchSettings,
    Slo,
    cheapest_per_fleet,
    pareto_front,
    rank,
    search,
)
from switchyard.accelerator.sim.search_space import Skipped, configuration_space
from switchyard.platform.priority import lower_thread_priority
from switchyard.platform.simulation.traffic import RecordedWorkload

__all__ = [
    "DEFAULT_REPLICAS",
    "DEFAULT_TPOT_MS",
    "DEFAULT_TTFT_MS",
    "MAX_CONFIGURATIONS",
    "TIME_LIMIT_S",
    "Baseline",
    "CapacityAnswer",
    "CapacityError",
    "CapacityQuestion",
    "CapacitySearchBusy",
    "CurrentDeployment",
    "InstanceChoice",
    "answer_capacity",
    "baseline",
    "current_deployment",
    "default_tps",
    "instance_choices",
    "run_capacity_search",
    "simulator_model",
]

MAX_CONFIGURATIONS = 48  # a configuration takes ~0.1-0.5 s of CPU at 200 requests
TIME_LIMIT_S = 30.0
SEARCH_NICE = 5  # the search thread's CPU priority below the API's (Linux: per thread)
DEFAULT_TTFT_MS = 2000.0  # the TTFT objective when the model has no current deployment to measure
DEFAULT_TPOT_MS = 100.0
DEFAULT_REPLICAS = (1, 2)
FALLBACK_TPS = (2, 4, 8)


class CapacityError(ValueError):
    """A question the search cannot answer as asked (said to the operator as it is)."""


class CapacitySearchBusy(RuntimeError):
    """Another capacity search is running in this process."""


@dataclass(frozen=True, slots=True)
class InstanceChoice:
    """An instance type of the simulator's catalog, as the form offers it."""

    name: str
    chip: str
    chips: int
    price_usd_per_hour: Decimal | None  # None: no price in the catalog, so the search skips it

    @property
    def family(self) -> str:
        return self.name.split(".")[0].split("-")[0]


@dataclass(frozen=True, slots=True)
class CurrentDeployment:
    """The fleet's simulated deployment of a served model: where its traffic runs today."""

    served_name: str
    model: str  # the simulator's catalog model
    instance: str
    tp: int
    replicas: int
    max_batch: int
    policy: str
    weights: str
    # speculative decoding as the fleet file states it ("" / None: a catalog pair's own, else none)
    draft_model: str = ""
    num_speculative_tokens: int | None = None
    acceptance_rate: float | None = None

    def deployment(self) -> Deployment:
        """The simulator's replica of it: the one the fleet serves (``simulated_deployment`` of its spec)."""
        return simulated_deployment(self.spec())

    def spec(self) -> DeploymentSpec:
        """The fleet file's deployment it was read from (the fields capacity planning uses)."""
        return DeploymentSpec(
            name=self.served_name,
            model=self.model,
            instance=self.instance,
            tp=self.tp,
            replicas=self.replicas,
            max_batch=self.max_batch,
            policy=self.policy,
            weights=self.weights,
            draft_model=self.draft_model,
            num_speculative_tokens=self.num_speculative_tokens,
            acceptance_rate=self.acceptance_rate,
        )


@dataclass(frozen=True, slots=True)
class CapacityQuestion:
    """What the operator asks: which instance types, TP degrees and replica counts, within which p90 objectives
    (None: the defaults above), with assumed prices (USD per instance-hour) for instance types the catalog does not
    price (Trainium3 UltraServers, CS-3): the results name them as assumed."""

    instances: tuple[str, ...]
    tps: tuple[int, ...]
    replicas: tuple[int, ...] = DEFAULT_REPLICAS
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    assumed_prices: tuple[tuple[str, Decimal], ...] = ()

    @property
    def size(self) -> int:
        return len(self.instances) * len(self.tps) * len(self.replicas)


@dataclass(frozen=True, slots=True)
class Baseline:
    """The recorded workload replayed on the current deployment at the recorded rate."""

    deployment: CurrentDeployment
    ttft_p90_ms: float
    tpot_p90_ms: float


@dataclass(frozen=True, slots=True)
class CapacityAnswer:
    """What the search found: ``pareto`` (cost per million output tokens against p90 TTFT, cheapest first) and the
    cheapest configuration per instance type, within ``slo``."""

    model: str  # the simulator's catalog model searched
    slo: Slo
    ttft_from: str  # "form", "current deployment" or "default"
    tpot_from: str  # "form" or "default"
    baseline: Baseline | None
    configurations: int  # in the space, after the skipped
    evaluated: int
    pruned: int
    complete: bool  # False: stopped at the time limit, the results are those of the configurations evaluated
    elapsed_s: float
    pareto: list[ConfigResult]
    best_per_instance: list[ConfigResult]  # cheapest first; an instance type with no feasible configuration is absent
    infeasible_instances: list[str]  # evaluated, but no configuration of theirs met the SLO at any rate
    skipped: list[Skipped] = field(default_factory=list)
    assumed_prices: dict[str, Decimal] = field(default_factory=dict)  # USD per instance-hour, not the catalog's


def instance_choices() -> list[InstanceChoice]:
    """Every instance type of the catalog, Trainium first."""
    found = [InstanceChoice(i.name, i.chip.name, i.chips, i.price_usd_per_hour) for i in list_instances()]
    return sorted(found, key=lambda c: (not c.name.startswith("trn"), c.name))


def _specs(fleet_file: str) -> tuple[DeploymentSpec, ...]:
    try:
        return load_fleet(fleet_file or None)
    except ConfigurationError:
        return ()  # a broken fleet file is the fleet's problem; the page then knows no current deployment


def _spec_of(served_name: str, fleet_file: str) -> DeploymentSpec | None:
    specs = _specs(fleet_file)
    name = model_aliases(specs).get(served_name, served_name) if specs else served_name
    return next((s for s in specs if s.name == name), None)


def current_deployment(served_name: str, fleet_file: str) -> CurrentDeployment | None:
    """The ``trainium-sim`` deployment that serves ``served_name`` (a model id of the usage ledger) in the fleet
    file (empty: the default fleet); None for an upstream model or one the fleet no longer serves."""
    spec = _spec_of(served_name, fleet_file)
    if spec is None or spec.backend != "trainium-sim" or spec.task != "chat":
        return None
    return CurrentDeployment(
        served_name=spec.name,
        model=spec.model,
        instance=spec.instance,
        tp=spec.tp,
        replicas=spec.replicas,
        max_batch=spec.max_batch,
        policy=spec.policy,
        weights=spec.weights,
        draft_model=spec.draft_model,
        num_speculative_tokens=spec.num_speculative_tokens,
        acceptance_rate=spec.acceptance_rate,
    )


def simulator_model(served_name: str, fleet_file: str) -> str:
    """The simulator's catalog model for a served model: its deployment's, else the served name itself if the
    catalog knows it; raises ``CapacityError`` otherwise."""
    current = current_deployment(served_name, fleet_file)
    if current is not None:
        return current.model
    try:
        return get_model(served_name).name
    except UnknownNameError:
        raise CapacityError(
            f"the simulator's catalog has no model for {served_name!r} (it is not a simulated deployment of the "
            "fleet): its traffic cannot be simulated"
        ) from None


def default_tps(current: CurrentDeployment | None) -> tuple[int, ...]:
    """A few TP degrees: the current deployment's, half and double it; else 2, 4 and 8."""
    if current is None:
        return FALLBACK_TPS
    return tuple(sorted({max(1, current.tp // 2), current.tp, current.tp * 2}))


def baseline(workload: Sequence[Request], current: CurrentDeployment) -> Baseline | None:
    """The workload on the current deployment at its recorded arrival times; None if the simulator cannot build
    that deployment (its catalog changed since the fleet file was written)."""
    try:
        dep = current.deployment()
    except SimulatorError:  # a name or a fit the catalog no longer has
        return None
    cluster = Cluster(dep, current.replicas, current.policy, config=EngineConfig(max_batch=current.max_batch))
    summary = summarize(cluster.run(list(workload)), cluster)
    ttft_ms, tpot_ms = summary.ttft_ms["p90"], summary.tpot_ms["p90"]
    if summary.rejected or not math.isfinite(ttft_ms) or ttft_ms <= 0:
        return None  # requests the deployment cannot hold: today's latency is not known this way
    return Baseline(current, ttft_ms, tpot_ms)


def _speculation_of(current: CurrentDeployment | None) -> dict[str, Any]:
    """The current deployment's speculative decoding, for every configuration searched: the alternatives serve the
    traffic as today's deployment does (none without a current deployment)."""
    if current is None:
        return {}
    return {
        "draft_model": current.draft_model,
        "num_speculative_tokens": current.num_speculative_tokens,
        "acceptance_rate": current.acceptance_rate,
    }


def answer_capacity(
    workload: RecordedWorkload,
    question: CapacityQuestion,
    *,
    model: str,
    current: CurrentDeployment | None,
    time_limit_s: float = TIME_LIMIT_S,
) -> CapacityAnswer:
    """Run the search here (synchronous, CPU-bound: call it off the event loop, see ``run_capacity_search``)."""
    if not workload.searchable:
        raise CapacityError(
            "too little traffic to search: it needs two requests at least, at different times "
            f"({workload.recorded} recorded)"
        )
    if not question.instances or not question.tps or not question.replicas:
        raise CapacityError("choose one instance type, TP degree and replica count at least")
    if min(question.tps) < 1 or min(question.replicas) < 1:
        raise CapacityError("TP degrees and replica counts are 1 or more")
    if question.size > MAX_CONFIGURATIONS:
        raise CapacityError(
            f"{question.size} configurations asked ({len(question.instances)} instance types x {len(question.tps)} "
            f"TP degrees x {len(question.replicas)} replica counts); the console searches {MAX_CONFIGURATIONS} at "
            "most: fewer choices, or `switchyard simulate search --workers celery` for more"
        )
    started = time.monotonic()
    requests = workload.requests
    base = baseline(requests, current) if current is not None else None
    if question.ttft_ms is not None:
        ttft_ms, ttft_from = question.ttft_ms, "form"
    elif base is not None:
        ttft_ms, ttft_from = float(math.ceil(base.ttft_p90_ms)), "current deployment"
    else:
        ttft_ms, ttft_from = DEFAULT_TTFT_MS, "default"
    tpot_ms, tpot_from = (question.tpot_ms, "form") if question.tpot_ms is not None else (DEFAULT_TPOT_MS, "default")
    slo = Slo(ttft_ms=ttft_ms, tpot_ms=tpot_ms, percentile=90.0)
    prices = dict(question.assumed_prices)
    try:
        space, skipped = configuration_space(
            model,
            question.instances,
            tps=question.tps,
            replicas=question.replicas,
            assumed_prices=prices,
            **_speculation_of(current),
        )
    except SimulatorError as exc:  # an unknown instance type
        raise CapacityError(str(exc)) from None
    if not space:
        reasons = sorted({f"{s.instance}: {s.reason}" for s in skipped})
        raise CapacityError("no configuration of the space can run: " + "; ".join(reasons[:4]))
    results: list[ConfigResult] = []
    pruned = 0
    deadline = started + time_limit_s

    def progress(step: SearchProgress) -> None:
        nonlocal pruned
        if step.result is not None:
            results.append(step.result)
        pruned = step.pruned
        if time.monotonic() > deadline and step.done < step.total:
            raise _OutOfTime

    settings = SearchSettings(
        requests=len(requests), assumed_prices=tuple(sorted((name, str(usd)) for name, usd in prices.items()))
    )
    complete = True
    try:
        search(space, requests, slo, settings, skipped=skipped, on_progress=progress)
    except _OutOfTime:
        complete = False
    except SimulatorError as exc:
        raise CapacityError(f"the simulator refused the search: {exc}") from None
    best = cheapest_per_fleet(results)
    evaluated_instances = {r.configuration.instance for r in results}
    return CapacityAnswer(
        model=model,
        slo=slo,
        ttft_from=ttft_from,
        tpot_from=tpot_from,
        baseline=base,
        configurations=len(space),
        evaluated=len(results),
        pruned=pruned,
        complete=complete,
        elapsed_s=time.monotonic() - started,
        pareto=pareto_front(results),
        best_per_instance=sorted(best.values(), key=rank),
        infeasible_instances=sorted(evaluated_instances - set(best)),
        skipped=skipped,
        assumed_prices={name: usd for name, usd in prices.items() if name in evaluated_instances},
    )


class _OutOfTime(Exception):
    """Raised from the search's progress callback to stop it at the time limit."""


_search_thread = ThreadPoolExecutor(1, "capacity-search", partial(lower_thread_priority, SEARCH_NICE))
_one_at_a_time = threading.Lock()


async def run_capacity_search(
    workload: RecordedWorkload,
    question: CapacityQuestion,
    *,
    model: str,
    current: CurrentDeployment | None,
    time_limit_s: float = TIME_LIMIT_S,
) -> CapacityAnswer:
    """``answer_capacity`` on the search thread, off the event loop; raises ``CapacitySearchBusy`` at once when
    another search of this process has not finished (a cancelled caller's search still runs to its time limit and
    holds the thread until then)."""
    if not _one_at_a_time.acquire(blocking=False):
        raise CapacitySearchBusy("another capacity search is running; try again when it has finished")

    try:
        future = _search_thread.submit(
            answer_capacity, workload, question, model=model, current=current, time_limit_s=time_limit_s
        )
    except BaseException:
        _one_at_a_time.release()
        raise
    # Released when the search ends, or when it is cancelled before the thread took it: never while it runs.
    future.add_done_callback(lambda _: _one_at_a_time.release())
    return await asyncio.wrap_future(future)
