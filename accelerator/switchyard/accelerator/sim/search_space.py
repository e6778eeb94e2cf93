"""What a configuration search ranges over: the configurations, what each costs, and analytic bounds on what each
can do (which let the search skip configurations that cannot win).

A configuration is one fleet: `replicas` copies of a model on an instance type at a tensor-parallel degree, with
an engine (max batch, chunk size, routing), a weights and KV-cache element type, for mixture-of-experts models
tensor or expert parallelism, and speculative decoding with a draft model (make_deployment's `draft_model`,
`num_speculative_tokens`, `acceptance_rate`), the same for every configuration of a search. A disaggregated
configuration adds a decode pool (e.g. Cerebras CS-3 beside Trainium prefill): prompts run on the first pool, their
KV caches cross the network, the decode pool generates.

Prices: an instance's price comes from the catalog; one the catalog does not price (CS-3, Trainium3) can be given
as an assumed price (`assumed_prices`), which the results then name as assumed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from itertools import product
from typing import Any

import numpy as np

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import Deployment, KvCacheDtype, Precision, make_deployment
from switchyard.accelerator.sim.disaggregated import DisaggregatedCluster
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hardware import Instance, get_instance
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.router import RoutingPolicy
from switchyard.accelerator.sim.stepcost import StepCost

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "PARALLELISMS",
    "Configuration",
    "Skipped",
    "capacity_bound_rps",
    "configuration_space",
    "cost_per_million",
    "fleet_usd_per_hour",
    "ttft_floor_ms",
]

DEFAULT_CHUNK_TOKENS = EngineConfig().max_batched_tokens
PARALLELISMS = ("tp", "ep")  # ep: a mixture-of-experts model's experts placed whole on the ranks


@dataclass(frozen=True, slots=True)
class Configuration:
    """One fleet to evaluate: `replicas` copies of `model` at `tp` ranks on `instance` (and, when `decode_instance`
    is set, a decode pool of `decode_replicas` copies at `decode_tp` ranks on it)."""

    model: str
    instance: str
    tp: int
    replicas: int
    max_batch: int
    routing: str
    weights: str
    parallelism: str = "tp"
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS  # the token budget of one iteration (chunked prefill)
    kv_dtype: str = KvCacheDtype.BF16.value
    decode_instance: str = ""
    decode_tp: int = 0
    decode_replicas: int = 0
    # speculative decoding, in every pool: "" / None leave a catalog target + draft pair's own draft and tokens
    draft_model: str = ""
    num_speculative_tokens: int | None = None
    acceptance_rate: float | None = None  # None: the simulator's default (DEFAULT_ACCEPTANCE_RATE)

    @property
    def speculation(self) -> dict[str, Any]:
        """make_deployment's speculative-decoding arguments (None where the configuration leaves them)."""
        return _speculation(self.draft_model, self.num_speculative_tokens, self.acceptance_rate)

    @property
    def disaggregated(self) -> bool:
        return bool(self.decode_instance)

    @property
    def fleet_name(self) -> str:
        """The instance type, or "prefill + decode" instance types of a disaggregated fleet."""
        return f"{self.instance} + {self.decode_instance}" if self.disaggregated else self.instance

    def label(self) -> str:
        """The configuration in a few words."""
        base = f"{self.instance} TP{self.tp} x{self.replicas} batch {self.max_batch} {self.routing} {self.weights}"
        return " ".join([base, *self.extras()])

    def extras(self) -> list[str]:
        """What differs from the defaults of the options beyond instance, TP, replicas, batch, routing and weights."""
        words = []
        if self.parallelism != "tp":
            words.append(self.parallelism.upper())
        if self.chunk_tokens != DEFAULT_CHUNK_TOKENS:
            words.append(f"chunk {self.chunk_tokens}")
        if self.kv_dtype != KvCacheDtype.BF16.value:
            words.append(f"KV {self.kv_dtype}")
        if self.disaggregated:
            words.append(f"decode on {self.decode_instance} TP{self.decode_tp} x{self.decode_replicas}")
        if self.draft_model:
            words.append(f"draft {self.draft_model}")
        if self.num_speculative_tokens is not None:
            words.append(f"{self.num_speculative_tokens} drafted tokens")
        if self.acceptance_rate is not None:
            words.append(f"acceptance {self.acceptance_rate:g}")
        return words

    def deployment(self) -> Deployment:
        """The (prefill) pool's replica."""
        return self._deployment(self.instance, self.tp)

    def decode_deployment(self) -> Deployment:
        """The replica that generates: the decode pool's, or the only pool's."""
        return self._deployment(self.decode_instance, self.decode_tp) if self.disaggregated else self.deployment()

    def _deployment(self, instance: str, tp: int) -> Deployment:
        return make_deployment(
            self.model,
            instance,
            tp,
            self.weights,
            kv_dtype=self.kv_dtype,
            expert_parallel=self.parallelism == "ep",
            **self.speculation,
        )

    def engine(self) -> EngineConfig:
        return EngineConfig(max_batch=self.max_batch, max_batched_tokens=self.chunk_tokens)

    def fleet(self, seed: int) -> Cluster | DisaggregatedCluster:
        """A fresh simulated fleet of this configuration."""
        pool = Cluster(self.deployment(), self.replicas, self.routing, config=self.engine(), seed=seed)
        if not self.disaggregated:
            return pool
        decode = Cluster(self.decode_deployment(), self.decode_replicas, self.routing, config=self.engine(), seed=seed)
        return DisaggregatedCluster(pool, decode)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def identity(self) -> dict[str, Any]:
        """`to_dict` less the speculation fields left unset: what tells a configuration apart in a cache key (so a
        configuration without them keys as it did before they existed, and one with a draft never as one without)."""
        unset = {k for k, v in self.speculation.items() if v is None}
        return {k: v for k, v in asdict(self).items() if k not in unset}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Configuration:
        """From `to_dict`; fields it lacks (results written before they existed) take their defaults."""
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True, slots=True)
class Skipped:
    """A configuration of the space that was not evaluated, and why."""

    instance: str
    tp: int
    weights: str
    reason: str


def configuration_space(
    model: str,
    instances: Sequence[str],
    *,
    tps: Sequence[int] | None = None,
    replicas: Sequence[int] = (1,),
    max_batches: Sequence[int] = (64,),
    routings: Sequence[str] = (RoutingPolicy.LEAST_LOAD.value,),
    weights: Sequence[str] = (Precision.BF16.value,),
    parallelisms: Sequence[str] = ("tp",),
    chunk_tokens: Sequence[int] = (DEFAULT_CHUNK_TOKENS,),
    kv_dtypes: Sequence[str] = (KvCacheDtype.BF16.value,),
    decode_instances: Sequence[str] = (),
    decode_tps: Sequence[int] | None = None,
    decode_replicas: Sequence[int] = (1,),
    assumed_prices: Mapping[str, Decimal] | None = None,
    draft_model: str = "",
    num_speculative_tokens: int | None = None,
    acceptance_rate: float | None = None,
) -> tuple[list[Configuration], list[Skipped]]:
    """The cross product of the options, less what cannot run: instances with no price (published or assumed), TP
    degrees the model cannot be split by or does not fit at, expert parallelism of a dense model (make_deployment's
    errors). `tps` (`decode_tps`) None: every power of two up to the instance. With `decode_instances`, every
    colocated configuration is also tried with each decode pool beside it. `draft_model`, `num_speculative_tokens`
    and `acceptance_rate` serve every configuration with speculative decoding (make_deployment's: a configuration it
    refuses, a draft of another vocabulary as much as one that does not fit beside the target, is skipped with its
    reason)."""
    prices = assumed_prices or {}
    speculation = _speculation(draft_model, num_speculative_tokens, acceptance_rate)
    _check_choices("parallelism", parallelisms, PARALLELISMS)
    _check_choices("KV cache type", kv_dtypes, tuple(k.value for k in KvCacheDtype))
    if any(c < 1 for c in chunk_tokens):
        raise ConfigurationError("a chunk holds at least one token")
    decode_pools: list[tuple[str, int, int]] = [("", 0, 0)] + [
        (name, dtp, dr)
        for name in decode_instances
        for dtp in _degrees(get_instance(name), decode_tps)
        for dr in decode_replicas
    ]
    space: list[Configuration] = []
    skipped: list[Skipped] = []
    for name, w in product(instances, weights):
        inst = get_instance(name)
        for tp, par, kv, (decode, dtp, dr) in product(_degrees(inst, tps), parallelisms, kv_dtypes, decode_pools):
            reason = _why_not(model, inst, tp, w, par, kv, prices, speculation)
            if decode and not reason:
                reason = _why_not(model, get_instance(decode), dtp, w, par, kv, prices, speculation)
                reason = reason and f"decode pool {decode} TP{dtp}: {reason}"
            if reason:
                skipped.append(Skipped(name, tp, w, reason))
                continue
            space += [
                Configuration(
                    model,
                    name,
                    tp,
                    r,
                    b,
                    RoutingPolicy(p).value,
                    w,
                    par,
                    c,
                    kv,
                    decode,
                    dtp,
                    dr,
                    draft_model,
                    num_speculative_tokens,
                    acceptance_rate,
                )
                for r, b, p, c in product(replicas, max_batches, routings, chunk_tokens)
            ]
    return space, list(dict.fromkeys(skipped))  # the same reason may recur across the other options


def _check_choices(name: str, given: Sequence[str], allowed: Sequence[str]) -> None:
    bad = [v for v in given if v not in allowed]
    if bad:
        raise ConfigurationError(f"unknown {name} {bad[0]!r}: choose from {', '.join(allowed)}")


def _degrees(inst: Instance, tps: Sequence[int] | None) -> list[int]:
    return list(tps) if tps else [1 << k for k in range(inst.max_tp.bit_length()) if 1 << k <= inst.max_tp]


def _speculation(draft_model: str, tokens: int | None, acceptance_rate: float | None) -> dict[str, Any]:
    return {"draft_model": draft_model or None, "num_speculative_tokens": tokens, "acceptance_rate": acceptance_rate}


def _why_not(
    model: str,
    inst: Instance,
    tp: int,
    weights: str,
    parallelism: str,
    kv: str,
    prices: Mapping[str, Any],
    speculation: Mapping[str, Any],
) -> str:
    """Why a pool of `tp` ranks on `inst` cannot be evaluated ("" when it can)."""
    if inst.price_usd_per_hour is None and inst.name not in prices:
        return "no price"
    try:
        make_deployment(model, inst, tp, weights, kv_dtype=kv, expert_parallel=parallelism == "ep", **speculation)
    except ConfigurationError as exc:
        return str(exc)
    return ""


def _usd_per_chip_hour(inst: Instance, assumed_prices: Mapping[str, Decimal]) -> Decimal:
    published = inst.price_per_chip_hour()
    if published is not None:
        return published
    if inst.name in assumed_prices:
        return assumed_prices[inst.name] / inst.chips
    raise ConfigurationError(f"{inst.name} has no price (give it one as an assumed price)")


def fleet_usd_per_hour(config: Configuration, assumed_prices: Mapping[str, Decimal] | None = None) -> Decimal:
    """What the fleet costs per hour: its chips at each instance's price per chip-hour (summarize()'s pricing), the
    catalog's price or, for an instance the catalog does not price, the assumed one."""
    prices = assumed_prices or {}
    dep = config.deployment()
    usd = Decimal(config.replicas * dep.chips) * _usd_per_chip_hour(dep.instance, prices)
    if config.disaggregated:
        dec = config.decode_deployment()
        usd += Decimal(config.decode_replicas * dec.chips) * _usd_per_chip_hour(dec.instance, prices)
    return usd


def cost_per_million(usd_per_hour: Decimal, rate_rps: float, mean_output_tokens: float) -> Decimal:
    """USD per million output tokens of a fleet at `usd_per_hour` serving `rate_rps` requests a second."""
    tokens_per_hour = Decimal(repr(rate_rps * mean_output_tokens * 3600))
    return (usd_per_hour * Decimal(1_000_000) / tokens_per_hour).quantize(Decimal("0.0001"))


def capacity_bound_rps(config: Configuration, requests: Sequence[Request]) -> float:
    """An upper bound on the requests per second the fleet serves: the least of its decode throughput at a full
    batch (a request holds a slot for at least one iteration per output token, and `max_batch` sequences per
    iteration time is the most sequence-iterations a second holds, since step time grows more slowly than the
    batch) and its prefill throughput at full chunks (`chunk_tokens` prompt tokens an iteration) over the mean
    prompt; in a disaggregated fleet decode is the decode pool's and prefill the prefill pool's. Contexts are
    taken as one token, so it errs high; prompts served from a prefix cache could beat it, and then the search
    reports the rate as capped.
    """
    mean_in = sum(r.prompt_tokens for r in requests) / len(requests)
    mean_out = sum(r.output_tokens for r in requests) / len(requests)
    prefill_dep, decode_dep = config.deployment(), config.decode_deployment()
    decode_cost = StepCost(decode_dep, coefficients_for(decode_dep.instance)[1])
    step_s = decode_cost.iteration_s(0, 0.0, 0.0, [1] * config.max_batch)
    decode_replicas = config.decode_replicas if config.disaggregated else config.replicas
    slots = decode_replicas * config.max_batch / (mean_out * step_s)
    prefill_cost = StepCost(prefill_dep, coefficients_for(prefill_dep.instance)[1])
    chunk = config.chunk_tokens
    prefill = config.replicas * chunk / (mean_in * prefill_cost.iteration_s(chunk, 0.0, 0.0, []))
    return min(slots, prefill)


def ttft_floor_ms(config: Configuration, requests: Sequence[Request]) -> float:
    """A lower bound on the TTFT p90 (the Pareto front's axis) at any rate: the p90 over the requests of their first
    prefill chunk run alone (every term of an iteration only grows with company, smaller chunks and padding).
    Requests with block hashes might be served from a prefix cache, so only one token of theirs is counted."""
    dep = config.deployment()
    cost = StepCost(dep, coefficients_for(dep.instance)[1])
    budget = config.chunk_tokens
    floors = [
        cost.iteration_s(1 if r.block_hashes else min(r.prompt_tokens, budget), 0.0, 0.0, []) * 1e3 for r in requests
    ]
    return float(np.percentile(floors, 90))
