"""A trace's timeline: one row per span (the queue wait, each step) on a shared time axis with round tick labels.

The console's CSP forbids ``style`` attributes, so positions are SVG attributes (per-mille of the axis) and tick
labels are placed by classes (``at-0`` … ``at-100``, the percentages an axis of one to five intervals needs).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Bar", "Span", "Tick", "Timeline", "format_ms", "timeline"]

_NICE_STEPS_MS = (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10_000, 15_000, 30_000)
_MINUTE_STEPS_MS = (60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000)
MAX_INTERVALS = 5
MIN_BAR_PER_MILLE = 4.0  # an instant step stays visible


@dataclass(frozen=True, slots=True)
class Span:
    """Something that took time: a label, its kind (``queue``, ``model_call``, ``tool_call``) and its extent in ms
    from the execution's creation."""

    label: str
    kind: str
    start_ms: int
    duration_ms: int
    anchor: str = ""  # the id of the step's details on the page, if it has any


@dataclass(frozen=True, slots=True)
class Bar:
    span: Span
    x: float  # per-mille of the axis
    width: float

    @property
    def start_label(self) -> str:
        return format_ms(self.span.start_ms)

    @property
    def duration_label(self) -> str:
        return format_ms(self.span.duration_ms)


@dataclass(frozen=True, slots=True)
class Tick:
    label: str
    at: int  # percent of the axis, one of the positions the CSS knows
    x: float  # per-mille, for the grid line


@dataclass(frozen=True, slots=True)
class Timeline:
    bars: list[Bar]
    ticks: list[Tick]
    axis_ms: int


def format_ms(ms: float) -> str:
    """A duration as a person reads it: ``0 ms``, ``250 ms``, ``1.5 s``, ``2 min``."""
    if ms < 1000:
        return f"{ms:g} ms"
    if ms < 60_000:
        return f"{ms / 1000:g} s"
    return f"{ms / 60_000:g} min"


def _step_ms(total_ms: int) -> int:
    for step in (*_NICE_STEPS_MS, *_MINUTE_STEPS_MS):
        if step * MAX_INTERVALS >= total_ms:
            return step
    return -(-total_ms // MAX_INTERVALS)


def timeline(spans: list[Span]) -> Timeline:
    """The spans on an axis that starts at 0 and ends at the first round tick at or past the last span's end."""
    total_ms = max([s.start_ms + s.duration_ms for s in spans] + [1])
    step = _step_ms(total_ms)
    intervals = max(1, -(-total_ms // step))
    axis_ms = step * intervals
    ticks = [Tick(format_ms(k * step), round(100 * k / intervals), 1000 * k / intervals) for k in range(intervals + 1)]
    bars = []
    for span in spans:
        x = 1000 * span.start_ms / axis_ms
        width = max(1000 * span.duration_ms / axis_ms, MIN_BAR_PER_MILLE)
        bars.append(Bar(span, min(x, 1000 - MIN_BAR_PER_MILLE), min(width, 1000 - min(x, 1000 - MIN_BAR_PER_MILLE))))
    return Timeline(bars=bars, ticks=ticks, axis_ms=axis_ms)
