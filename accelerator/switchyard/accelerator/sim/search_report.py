"""The HTML report of a configuration search (`simulate search`): one self-contained page, plots as inline SVG.

Sections: what was searched (model, workload, SLO, counts, skipped configurations by reason); the Pareto plot of
cost per million output tokens against TTFT p90; the cheapest configuration per instance type and per family; the
cheapest per family at other SLOs (sensitivity); published price-performance claims beside what the search found.
Every piece of text is escaped (model names, workload specs and skip reasons come from the user), and the page
loads nothing: claim sources are shown as text, not links.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from decimal import Decimal

from switchyard.accelerator.sim.hardware import get_instance
from switchyard.accelerator.sim.price_claims import ClaimSide, PriceClaim, aws_family, load_price_claims
from switchyard.accelerator.sim.search import ConfigResult, SearchResult, Slo
from switchyard.accelerator.sim.search_space import Configuration

__all__ = ["fleet_family", "front_label", "pareto_svg", "report_family", "search_html"]

# The report's families, in table order, and their colours in the plot; anything else is grey.
FAMILY_COLOURS = {"trn1": "#1f77b4", "trn2": "#ff7f0e", "trn3": "#d62728", "inf2": "#2ca02c", "GPU": "#9467bd"}
_OTHER_COLOUR = "#7f7f7f"
_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 760, 420, 70, 110, 30, 50


def report_family(instance: str) -> str:
    """The report's grouping: trn1, trn2, trn3, inf2 (UltraServer and network variants included), GPU, CS-3, or else
    the AWS family."""
    family = aws_family(instance)
    for name in ("trn1", "trn2", "trn3", "inf2"):
        if family.startswith(name):
            return name
    chip = get_instance(instance).chip.family
    return {"gpu": "GPU", "wafer": "CS-3"}.get(chip, family)


def fleet_family(c: Configuration) -> str:
    """The report family of a configuration's fleet: its instance's, or "prefill + decode" families."""
    family = report_family(c.instance)
    return f"{family} + {report_family(c.decode_instance)}" if c.disaggregated else family


def front_label(r: ConfigResult) -> str:
    """How the plot labels a Pareto point: instance (and decode instance), TP and replicas."""
    c = r.configuration
    return f"{c.fleet_name} TP{c.tp} x{c.replicas}"


def search_html(
    result: SearchResult,
    *,
    sensitivity: Sequence[tuple[Slo, SearchResult]] = (),
    claims: Sequence[PriceClaim] | None = None,
) -> str:
    """The report as one HTML page. `sensitivity`: the same search run at other SLOs; `claims`: None for the
    repository's table (load_price_claims())."""
    title = f"Configuration search: {result.model}"
    sections = [
        _header(result),
        "<h2>Pareto front: cost against TTFT p90</h2>",
        pareto_svg(result),
        _infeasible(result),
        "<h2>Cheapest per instance type</h2>",
        "<p>A + after the max rate: the SLO still held at the capacity bound, so the rate is at least this.</p>",
        _table(_RESULT_HEAD, [_result_row(r) for r in result.best_per_instance.values()], "best-per-instance"),
        "<h2>Cheapest per family</h2>",
        _table(
            ("family", *_RESULT_HEAD),
            [(f, *_result_row(r)) for f, r in _best_per_family(result).items()],
            "best-per-family",
        ),
        "<h2>SLO sensitivity</h2>",
        _sensitivity(result, sensitivity),
        "<h2>Published price-performance claims</h2>",
        _claims(result, load_price_claims() if claims is None else claims),
    ]
    style = (
        "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:0.5em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{style}</style>"
        f"</head><body><h1>{_e(title)}</h1>" + "\n".join(sections) + "</body></html>\n"
    )


def _e(value: object) -> str:
    return html.escape(str(value))


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], table_id: str) -> str:
    cells = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    head_row = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f"<table id='{table_id}'><tr>{head_row}</tr>{cells}</table>"


def _slo_text(slo: Slo) -> str:
    return f"p{slo.percentile:g} TTFT <= {slo.ttft_ms:g} ms and TPOT <= {slo.tpot_ms:g} ms"


def _header(result: SearchResult) -> str:
    workload = "; ".join(f"{k}: {v}" for k, v in result.workload.items())
    by_reason: dict[str, list[str]] = defaultdict(list)
    for s in result.skipped:
        by_reason[s.reason].append(f"{s.instance} TP{s.tp} {s.weights}")
    skipped = "".join(f"<li>{_e(reason)} ({len(v)}): {_e(', '.join(v))}</li>" for reason, v in by_reason.items())
    return (
        f"<p>Model: {_e(result.model)}<br>Workload: {_e(workload)}<br>SLO: {_e(_slo_text(result.slo))}<br>"
        f"{result.configurations_evaluated} configurations evaluated ({result.simulated} simulated, the rest from "
        f"the cache), {result.pruned} pruned (dominated before simulation), {len(result.skipped)} skipped.</p>"
        + (f"<p>Skipped, by reason:</p><ul>{skipped}</ul>" if skipped else "")
    )


_RESULT_HEAD = (
    "instance",
    "TP",
    "replicas",
    "max batch",
    "routing",
    "weights",
    "max req/s",
    "$ per M output tokens",
    "TTFT p90 ms",
    "TPOT p90 ms",
    "req/s per $/h",
    "other",
)


def _result_row(r: ConfigResult) -> tuple[str, ...]:
    c = r.configuration
    rate = f"{r.max_rate_rps:.2f}{'+' if r.rate_capped else ''}"  # + : the SLO still held at the capacity bound
    return (
        c.fleet_name,
        str(c.tp),
        str(c.replicas),
        str(c.max_batch),
        c.routing,
        c.weights,
        rate,
        str(r.cost_per_million_tokens_usd),
        f"{r.ttft_p90_ms:.1f}",
        f"{r.tpot_p90_ms:.2f}",
        f"{r.qps_per_dollar:.3f}",
        ", ".join(c.extras()),
    )


def _cost(r: ConfigResult) -> Decimal:
    assert r.cost_per_million_tokens_usd is not None  # only feasible results are ranked
    return r.cost_per_million_tokens_usd


def _family_order(family: str) -> tuple[int, str]:
    order = list(FAMILY_COLOURS)
    return (order.index(family), "") if family in order else (len(order), family)


def _best_per_family(result: SearchResult) -> dict[str, ConfigResult]:
    best: dict[str, ConfigResult] = {}
    for r in result.best_per_instance.values():
        family = fleet_family(r.configuration)
        if family not in best or (_cost(r), r.ttft_p90_ms) < (_cost(best[family]), best[family].ttft_p90_ms):
            best[family] = r
    return {f: best[f] for f in sorted(best, key=_family_order)}


def pareto_svg(result: SearchResult) -> str:
    """The Pareto plot: an SVG element, valid as an SVG file of its own too; a sentence when nothing meets the SLO."""
    feasible = [r for r in result.evaluated if r.feasible]
    if not feasible:
        return "<p>No configuration meets the SLO at any rate: nothing to plot.</p>"
    costs = [float(_cost(r)) for r in feasible]
    log_y = max(costs) > 10 * min(costs)

    def ty(v: float) -> float:
        return math.log10(v) if log_y else v

    x0, x1 = _span([r.ttft_p90_ms for r in feasible])
    x0 = max(x0, 0.0)  # no negative times on the axis
    y0, y1 = _span([ty(c) for c in costs])

    def px(v: float) -> float:
        return _LEFT + (v - x0) / (x1 - x0) * (_W - _LEFT - _RIGHT)

    def py(v: float) -> float:
        return _H - _BOTTOM - (ty(v) - y0) / (y1 - y0) * (_H - _BOTTOM - _TOP)

    bottom, right = _H - _BOTTOM, _W - _RIGHT
    y_axis = "$ per million output tokens" + (" (log)" if log_y else "")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" font-size="11" role="img">',
        f'<line x1="{_LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}" stroke="black"/>',
        f'<text x="{(_LEFT + right) / 2}" y="{_H - 10}" text-anchor="middle">TTFT p90 (ms)</text>',
        f'<text x="14" y="{(_TOP + bottom) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(_TOP + bottom) / 2})">{y_axis}</text>',
    ]
    for k in range(5):
        xv, yv = x0 + k / 4 * (x1 - x0), y0 + k / 4 * (y1 - y0)
        tick_x, tick_y = _LEFT + k / 4 * (right - _LEFT), bottom - k / 4 * (bottom - _TOP)
        parts.append(f'<text x="{tick_x:.1f}" y="{bottom + 14}" text-anchor="middle">{xv:.4g}</text>')
        parts.append(
            f'<text x="{_LEFT - 4}" y="{tick_y + 4:.1f}" text-anchor="end">{10**yv if log_y else yv:.3g}</text>'
        )
    front = sorted(result.pareto, key=lambda r: r.ttft_p90_ms)
    if front:  # a staircase: from each front point, this cost is reachable at any slower TTFT
        steps = "".join(f"H{px(r.ttft_p90_ms):.1f}V{py(float(_cost(r))):.1f}" for r in front[1:])
        start = f"M{px(front[0].ttft_p90_ms):.1f},{py(float(_cost(front[0]))):.1f}"
        parts.append(f'<path d="{start}{steps}H{right}" fill="none" stroke="black" stroke-dasharray="4 2"/>')
    for r in feasible:
        c = r.configuration
        tip = f"{c.label()}: ${r.cost_per_million_tokens_usd}/M tokens, TTFT p90 {r.ttft_p90_ms:.1f} ms"
        ring = ' stroke="black" stroke-width="1.5"' if r in result.pareto else ""
        parts.append(
            _marker(fleet_family(c), px(r.ttft_p90_ms), py(float(_cost(r))), ring, f"<title>{_e(tip)}</title>")
        )
    label_y = -math.inf
    for r in front:  # dearest (top) first; each label at least a line below the one before, so none overlap
        label_y = max(py(float(_cost(r))) - 4, label_y + 12)
        parts.append(f'<text x="{px(r.ttft_p90_ms) + 7:.1f}" y="{label_y:.1f}">{_e(front_label(r))}</text>')
    families = sorted({fleet_family(r.configuration) for r in feasible}, key=_family_order)
    for k, family in enumerate(families):
        parts.append(_marker(family, right + 16, _TOP + 14 * k))
        parts.append(f'<text x="{right + 24}" y="{_TOP + 4 + 14 * k}">{_e(family)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _marker(family: str, x: float, y: float, ring: str = "", title: str = "") -> str:
    """A plot point: a circle in its family's colour; a disaggregated fleet ("trn2 + CS-3") a square in its prefill
    family's colour."""
    prefill, _, decode = family.partition(" + ")
    colour = FAMILY_COLOURS.get(prefill, _OTHER_COLOUR)
    if decode:
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{colour}"{ring}>{title}</rect>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"{ring}>{title}</circle>'


def _span(values: Sequence[float]) -> tuple[float, float]:
    """The values' range with a margin, so no point sits on an axis; one value gets a range around it."""
    lo, hi = min(values), max(values)
    margin = (hi - lo) * 0.08 or abs(lo) * 0.1 or 1.0
    return lo - margin, hi + margin


def _infeasible(result: SearchResult) -> str:
    missed = [r.configuration for r in result.evaluated if not r.feasible]
    if not missed:
        return ""
    rows = [
        (c.fleet_name, str(c.tp), str(c.replicas), str(c.max_batch), c.routing, c.weights, ", ".join(c.extras()))
        for c in missed
    ]
    head = ("instance", "TP", "replicas", "max batch", "routing", "weights", "other")
    return "<p>Meet the SLO at no rate (not plotted):</p>" + _table(head, rows, "infeasible")


def _sensitivity(result: SearchResult, others: Sequence[tuple[Slo, SearchResult]]) -> str:
    if not others:
        return "<p>No other SLO was searched: no sensitivity to show.</p>"
    runs = [(f"{_slo_text(result.slo)} (this search)", result)] + [(_slo_text(s), r) for s, r in others]
    bests = [(label, _best_per_family(r)) for label, r in runs]
    families = sorted({f for _, best in bests for f in best}, key=_family_order)
    rows = [(label, *(_priced(best[f]) if f in best else "-" for f in families)) for label, best in bests]
    note = "<p>Cheapest $ per million output tokens per family; - : no configuration of it met that SLO.</p>"
    return note + _table(("SLO", *families), rows, "sensitivity")


def _priced(r: ConfigResult) -> str:
    return f"${r.cost_per_million_tokens_usd} ({front_label(r)})"


def _claims(result: SearchResult, claims: Sequence[PriceClaim]) -> str:
    rows = [(c.claim, c.scope, c.standing.value, c.source, c.note, c.claim_prices, _check(result, c)) for c in claims]
    head = ("claim", "scope", "standing", "source", "note", "prices behind the claim", "what this search found")
    return (
        "<p>Sources are shown as text; the report loads nothing.</p>"
        + _table(head, rows, "claims")
        + "<p>Prices behind the simulated costs (data/hardware.json):</p>"
        + _prices(result)
    )


def _check(result: SearchResult, claim: PriceClaim) -> str:
    """The search's cheapest cost per million tokens of each side and their ratio, or why it cannot say."""
    if claim.model is not None and result.model.rsplit("/", 1)[-1].lower() != claim.model.lower():
        return f"not checked: the claim is for {claim.model}, this search for {result.model}"
    found = [_side_best(result, side) for side in claim.compares]
    for f in found:
        if isinstance(f, str):
            return f
    a, b = (f for f in found if isinstance(f, ConfigResult))
    left, right = claim.compares
    ratio = float(_cost(a)) / float(_cost(b))
    return (
        f"{left.label} vs {right.label} cost per million output tokens: simulated {_priced(a)} vs {_priced(b)}, "
        f"ratio {left.label}/{right.label} {ratio:.2f}"
    )


def _side_best(result: SearchResult, side: ClaimSide) -> ConfigResult | str:
    """The side's cheapest configuration in the search, or what to say instead."""

    def ours(instance: str) -> bool:
        return aws_family(instance) in side.families

    best = [r for r in result.best_per_instance.values() if ours(r.configuration.instance)]
    if best:
        return min(best, key=lambda r: (_cost(r), r.ttft_p90_ms))
    if any(ours(r.configuration.instance) for r in result.evaluated):
        return f"not checked: no {side.label} configuration meets the SLO"
    if any(ours(s.instance) and s.reason == "no price" for s in result.skipped):
        return f"no price: skipped ({side.label})"
    # The search does not list the configurations it pruned, so an absent family may have been pruned.
    pruned = " (or every configuration of it pruned)" if result.pruned else ""
    return f"not checked: {side.label} not in this search{pruned}"


def _prices(result: SearchResult) -> str:
    names = {r.configuration.instance for r in result.evaluated} | {s.instance for s in result.skipped}
    names |= {r.configuration.decode_instance for r in result.evaluated if r.configuration.disaggregated}
    rows = []
    for name in sorted(names):
        inst = get_instance(name)
        if name in result.assumed_prices:
            price, basis = f"${result.assumed_prices[name]}/h", "assumed (given to the search: --assume-price)"
        elif inst.price_usd_per_hour is None:
            price, basis = "no price: skipped", "not published"
        else:
            price = f"${inst.price_usd_per_hour}/h"
            basis = "assumed (estimate)" if "price_usd_per_hour" in inst.estimates else "published"
        rows.append((name, price, basis, inst.source))
    return _table(("instance", "price", "published or assumed", "source"), rows, "prices")
