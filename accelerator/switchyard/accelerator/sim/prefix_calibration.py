"""What prefix caching costs and saves, fitted to the published prefix-caching on/off measurements.

The rows (`data/prefix_caching_rows.csv`, copied with their source columns from the Neuron 2026 collection):
Llama-3.3-70B on trn2.48xlarge at TP64, TTFT p50 with prefix caching off and on over four datasets whose cache
hit share the source states (>90 %, read as 0.9; ~25 %; 0 %). The prefix-caching build stores the KV cache in
blocks (NxD Inference's block layout and block attention kernel), which is a little slower when nothing hits.

Two coefficients, fitted in turn by least squares on the relative error of the on-TTFTs:
- `block_layout_overhead`: factor on every prefill-carrying iteration when the block layout is on, fitted to the
  pairs without hits (where nothing else differs);
- `cached_token_share`: each cached token a prefill reads costs this share of a computed prompt token's linear
  time (reading the cached blocks, padding the prefix to its compiled bucket), on top of the attention over it
  that the cost model already counts; fitted to the pairs with hits, given the overhead.
A dataset's prompt length is not published; it is taken as the length the calibrated cost model needs to reproduce
the dataset's off-TTFT, interpolating between the compiled prompt buckets.
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from importlib import resources

import numpy as np

from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.stepcost import StepCost

__all__ = ["PrefixCachingCost", "PrefixCachingFit", "fit_prefix_caching", "prefix_caching_cost"]

_ROWS = "data/prefix_caching_rows.csv"


@dataclass(frozen=True, slots=True)
class PrefixCachingCost:
    """The fitted coefficients (see the module docstring)."""

    block_layout_overhead: float = 1.0
    cached_token_share: float = 0.0


@dataclass(frozen=True, slots=True)
class PrefixCachingFit:
    """One on/off pair: the measured and predicted TTFTs (ms) and the speed-up from turning caching on."""

    dataset: str
    hit_share: float
    prompt_tokens: float  # implied by the off-TTFT
    ttft_off_ms: float
    ttft_on_ms: float
    predicted_on_ms: float

    @property
    def measured_speedup(self) -> float:
        return self.ttft_off_ms / self.ttft_on_ms

    @property
    def predicted_speedup(self) -> float:
        return self.ttft_off_ms / self.predicted_on_ms


def _rows() -> list[dict[str, str]]:
    text = resources.files("switchyard.accelerator.sim").joinpath(_ROWS).read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


def _prefill_s(cost: StepCost, tokens: float, cached: float) -> float:
    """One prompt's prefill of `tokens` new tokens after `cached` ones, interpolated between compiled buckets."""

    def at(n: float) -> float:
        return cost.iteration_s(int(n), n * (cached + n), cached, [], 1)

    if not cost.static or tokens <= 128:
        return at(max(tokens, 1.0))
    lo = 2.0 ** math.floor(math.log2(tokens))
    share = (tokens - lo) / lo
    return at(lo) + share * (at(2 * lo) - at(lo))


def _implied_prompt(cost: StepCost, ttft_s: float) -> float:
    lo, hi = 1.0, 131072.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _prefill_s(cost, mid, 0.0) < ttft_s else (lo, mid)
    return lo


def fit_prefix_caching() -> tuple[PrefixCachingCost, list[PrefixCachingFit]]:
    """Fit the coefficients to the packaged rows; returns them with each pair's measured and predicted TTFT."""
    pairs: dict[str, dict[str, dict[str, str]]] = {}
    for row in _rows():
        pairs.setdefault(row["dataset"], {})[row["caching"]] = row
    first = next(iter(pairs.values()))["off"]
    tp = int(first["tp"].split()[0])
    dep = make_deployment(first["model"], first["instance"], tp)
    cost = StepCost(dep, coefficients_for(dep.instance)[1])
    design, measured, meta = [], [], []
    for dataset, pair in pairs.items():
        off_ms, on_ms = float(pair["off"]["ttft_p50_ms"]), float(pair["on"]["ttft_p50_ms"])
        hit = float(pair["on"]["hit_share"])
        prompt = _implied_prompt(cost, off_ms / 1e3)
        cached = hit * prompt
        computed = _prefill_s(cost, prompt - cached, cached)
        # on-TTFT = overhead * computed + (overhead * share) * cached * seconds per token: linear in both unknowns
        design.append([computed / (on_ms / 1e3), cached * cost.prefill_s_per_token / (on_ms / 1e3)])
        measured.append(1.0)
        meta.append((dataset, hit, prompt, off_ms, on_ms, computed, cached))
    a, y, hits = np.asarray(design), np.asarray(measured), np.asarray([m[1] > 0 for m in meta])
    # no hit: on/off differ by the layout alone (the cached column is zero there)
    overhead = float(np.linalg.lstsq(a[~hits, :1], y[~hits], rcond=None)[0][0])
    residual = y[hits] - overhead * a[hits, 0]
    scaled = max(0.0, float(np.linalg.lstsq(a[hits, 1:], residual, rcond=None)[0][0]))
    fitted = PrefixCachingCost(float(overhead), float(scaled / overhead))
    report = [
        PrefixCachingFit(
            dataset,
            hit,
            prompt,
            off_ms,
            on_ms,
            1e3 * (overhead * computed + scaled * cached * cost.prefill_s_per_token),
        )
        for dataset, hit, prompt, off_ms, on_ms, computed, cached in meta
    ]
    return fitted, report


@functools.cache
def prefix_caching_cost() -> PrefixCachingCost:
    """The fitted coefficients (fitted once per process, in milliseconds)."""
    return fit_prefix_caching()[0]
