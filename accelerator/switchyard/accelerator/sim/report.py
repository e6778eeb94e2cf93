"""Plain-text table, a self-contained HTML report (inline SVG plots) and a progress line of a trace run."""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO, TypeVar

import numpy as np

from switchyard.accelerator.sim.costmodel import FloatArray
from switchyard.accelerator.sim.metrics import RunSummary
from switchyard.accelerator.sim.requests import FinishedRequest

__all__ = ["format_table", "html_report", "with_progress"]

T = TypeVar("T")

_W, _H, _PAD, _RIGHT = 540, 270, 64, 24
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def format_table(s: RunSummary) -> str:
    """The run summary as an aligned text table."""

    def pct(d: dict[str, float]) -> str:
        return f"{d['p50']:10.1f} {d['p90']:10.1f} {d['p99']:10.1f}"

    slo = f"TTFT<={s.slo_ttft_ms} ms, TPOT<={s.slo_tpot_ms} ms" if (s.slo_ttft_ms or s.slo_tpot_ms) else "none"
    cost = (
        "n/a (no published price)"
        if s.cost_per_million_output_tokens_usd is None
        else (f"${s.cost_per_million_output_tokens_usd} per M output tokens (total ${s.cost_usd})")
    )
    rows = [
        f"fleet            {s.replicas} x {s.instance} (tp={s.tp}, {s.chips} chips in all), {s.model}",
        f"policy           {s.policy}; coefficients: {s.coefficients_group}",
        f"requests         {s.requests} ({s.rejected} rejected), {s.preemptions} preemptions",
        f"duration         {s.duration_s:.1f} s simulated",
        f"throughput       {s.output_tokens_per_s:.1f} output tok/s, {s.requests_per_s:.2f} req/s",
        "latency (ms)           p50        p90        p99",
        f"  TTFT         {pct(s.ttft_ms)}",
        f"  TPOT         {pct(s.tpot_ms)}",
        f"  E2E          {pct(s.e2e_ms)}",
        f"  queue        {pct(s.queue_ms)}",
        f"SLO              {slo}: attainment {s.slo_attainment:.1%}, goodput {s.goodput_requests_per_s:.2f} req/s",
        f"utilisation      {s.utilisation:.1%} busy, mean batch {s.mean_batch:.1f} sequences",
        f"chip-hours       {s.chip_hours:.2f} provisioned, {s.busy_chip_hours:.2f} busy ({s.chip_us} chip-us)",
        f"cost             {cost}",
    ]
    if s.prefix_hit_rate is not None:  # beside the goodput it buys
        h = s.prefix_hit_rate
        rows.insert(
            rows.index(next(r for r in rows if r.startswith("SLO"))) + 1,
            f"prefix cache     {h['blocks']:.1%} of prompt blocks, {h['tokens']:.1%} of prompt tokens hit; "
            f"one infinite cache: {h['ideal_blocks']:.1%} / {h['ideal_tokens']:.1%}",
        )
    return "\n".join(rows)


def _fmt(v: float) -> str:
    """Axis numbers people read at a glance: 0.25, 12.5, 1,480, 30,800."""
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def _svg(
    title: str,
    xlabel: str,
    series: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    logx: bool = False,
    bars: bool = False,
) -> str:
    xs_all = np.concatenate([np.asarray(x, dtype=float) for _, x, _ in series if len(x)] or [np.zeros(1)])
    ys_all = np.concatenate([np.asarray(y, dtype=float) for _, _, y in series if len(y)] or [np.zeros(1)])

    def tx(v: FloatArray) -> FloatArray:
        return np.log10(np.maximum(v, 1e-3)) if logx else v

    x0, x1 = float(tx(xs_all).min()), float(tx(xs_all).max()) or 1.0
    y0, y1 = 0.0, float(ys_all.max()) or 1.0
    x1 = x1 if x1 > x0 else x0 + 1
    if bars:  # leave half a slot either side so the first and last bars are whole
        x0, x1 = x0 - 0.5, x1 + 0.5
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" font-size="11">',
        f'<text x="{_W / 2}" y="14" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>',
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _RIGHT}" y2="{_H - _PAD}" stroke="black"/>',
        f'<line x1="{_PAD}" y1="20" x2="{_PAD}" y2="{_H - _PAD}" stroke="black"/>',
        f'<text x="{_W / 2}" y="{_H - 12}" text-anchor="middle">{html.escape(xlabel)}</text>',
    ]
    for frac in (0.0, 0.5, 1.0):
        xv = x0 + frac * (x1 - x0)
        label = _fmt(10**xv if logx else xv)
        tick_x = _PAD + frac * (_W - _RIGHT - _PAD)
        parts.append(f'<text x="{tick_x:.1f}" y="{_H - _PAD + 14}" text-anchor="middle">{label}</text>')
        tick_y = _H - _PAD - frac * (_H - _PAD - 20)
        parts.append(f'<text x="{_PAD - 4}" y="{tick_y:.1f}" text-anchor="end">{_fmt(y0 + frac * (y1 - y0))}</text>')
    for k, (name, x, y) in enumerate(series):
        if not len(x):
            continue
        px: FloatArray = _PAD + (tx(np.asarray(x, dtype=float)) - x0) / (x1 - x0) * (_W - _RIGHT - _PAD)
        py: FloatArray = _H - _PAD - (np.asarray(y, dtype=float) - y0) / (y1 - y0) * (_H - _PAD - 20)
        step = max(1, len(px) // 400)  # thin long series: the plot does not need every point
        pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px[::step], py[::step], strict=True))
        colour = _COLOURS[k % len(_COLOURS)]
        if bars:
            width = (_W - _RIGHT - _PAD) / (len(px) + 1) * 0.6
            for a, b in zip(px, py, strict=True):
                height = _H - _PAD - b
                parts.append(
                    f'<rect x="{a - width / 2:.1f}" y="{b:.1f}" width="{width:.1f}" height="{height:.1f}" '
                    f'fill="{colour}"/>'
                )
            continue
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{pts}"/>')
        parts.append(
            f'<text x="{_W - 14}" y="{30 + 13 * k}" text-anchor="end" fill="{colour}">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _cdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    v = np.sort(np.asarray(values, dtype=float))
    return v.tolist(), (np.arange(1, len(v) + 1) / max(1, len(v))).tolist()


def html_report(summary: RunSummary, finished: Sequence[FinishedRequest], busy_s: Sequence[float]) -> str:
    """A standalone HTML page: the summary table and plots of latency CDFs, throughput, queue, utilisation."""
    served = [f for f in finished if f.rejected is None]
    t0 = min((f.arrival_s for f in finished), default=0.0)
    span = max(summary.duration_s, 1e-9)
    bins = np.linspace(0, span, 61)
    finish = np.array([f.finish_s - t0 for f in served])
    tokens = np.array([f.output_tokens for f in served], dtype=float)
    tput, _ = np.histogram(finish, bins=bins, weights=tokens)
    width = bins[1] - bins[0]
    arrivals = np.sort([f.arrival_s - t0 for f in finished])
    starts = np.sort([f.scheduled_s - t0 for f in finished])
    mids = (bins[:-1] + bins[1:]) / 2
    # Time-averaged queue length per bin: sample the step function finely, then average per bin.
    fine = np.linspace(0, span, 60 * 25 + 1)[:-1] + span / (60 * 25 * 2)
    waiting = np.searchsorted(arrivals, fine) - np.searchsorted(starts, fine)
    queued = waiting.reshape(60, 25).mean(axis=1)
    util_x = list(range(len(busy_s)))
    plots = [
        _svg(
            "Latency CDFs",
            "milliseconds (log)",
            [
                ("TTFT", *_cdf([f.ttft_ms for f in served])),
                ("TPOT", *_cdf([f.tpot_ms for f in served if f.output_tokens > 1])),
                ("E2E", *_cdf([f.e2e_ms for f in served])),
            ],
            logx=True,
        ),
        _svg("Output throughput", "simulated seconds", [("tokens/s", mids.tolist(), (tput / width).tolist())]),
        _svg("Requests waiting for admission", "simulated seconds", [("queued", mids.tolist(), queued.tolist())]),
        _svg("Per-replica utilisation", "replica", [("busy share", util_x, [b / span for b in busy_s])], bars=True),
    ]
    title = f"Switchyard simulation: {summary.replicas} x {summary.instance}, {summary.model}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body style='font-family:sans-serif'><h1>{html.escape(title)}</h1>"
        f"<pre>{html.escape(format_table(summary))}</pre>"
        + "".join(f"<div style='display:inline-block;margin:8px'>{p}</div>" for p in plots)
        + "</body></html>\n"
    )


def with_progress(
    items: Sequence[T],
    stream: TextIO | None,
    simulated_s: Callable[[], float],
    *,
    every_s: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[T]:
    """Yield `items`; on `stream` (None: silently) keep one line up to date, at most every `every_s` seconds:
    the share of requests submitted and the simulated time reached, then a final line when all are in."""
    if stream is None:
        yield from items
        return
    total = len(items)
    last = clock()

    def show(done: int) -> None:
        share = 100.0 * done / total if total else 100.0
        stream.write(f"\rsimulating {share:5.1f}%  {done:,}/{total:,} requests  {simulated_s():,.1f} s simulated")
        stream.flush()

    for index, item in enumerate(items):
        yield item
        if index & 63 == 0 and clock() - last >= every_s:
            last = clock()
            show(index + 1)
    show(total)
    stream.write("\n")
    stream.flush()
