"""Where one request's time went, stage by stage: the ``server-timing`` response header.

The edge starts a :class:`StageClock` for each HTTP request; the code a request passes through marks the end of each
stage (``auth`` when its key is verified, ``parse`` when the handler starts on a validated body, ``admission``,
``upstream`` when the model's receipt arrives, ``metering`` when its usage is committed) and the edge marks
``respond`` (the answer built and encoded) when the response starts, then sends, per stage::

    server-timing: auth;dur=0.081;desc="cpu 0.079", parse;dur=0.153;desc="cpu 0.150", ...

``dur`` is the stage's wall time and ``cpu`` the API process's CPU time (all its threads) meanwhile, both in
milliseconds. While the process serves one request at a time the CPU is that stage's own cost (what
``benchmarks/gateway.py`` reports); under load it includes the other requests' work. A stage marked twice (the
request's slot is given back after the model call: ``admission`` again) adds up. Time before authentication and
after the response starts (the server's HTTP parsing, a streamed body) is in no stage.
"""

from __future__ import annotations

from contextvars import ContextVar
from time import perf_counter_ns, process_time_ns

__all__ = ["StageClock", "mark_stage", "start_stage_clock"]

_clock: ContextVar[StageClock | None] = ContextVar("stage_clock", default=None)


class StageClock:
    __slots__ = ("_cpu", "_wall", "stages")

    def __init__(self) -> None:
        self._wall = perf_counter_ns()
        self._cpu = process_time_ns()
        self.stages: dict[str, list[int]] = {}  # stage -> [wall ns, cpu ns], in the order first marked

    def mark(self, stage: str) -> None:
        """The stage named ``stage`` ends now (it began at the previous mark)."""
        wall, cpu = perf_counter_ns(), process_time_ns()
        spent = self.stages.setdefault(stage, [0, 0])
        spent[0] += wall - self._wall
        spent[1] += cpu - self._cpu
        self._wall, self._cpu = wall, cpu

    def header(self) -> bytes:
        """The ``server-timing`` header's value."""
        return ", ".join(
            f'{stage};dur={wall / 1e6:.3f};desc="cpu {cpu / 1e6:.3f}"' for stage, (wall, cpu) in self.stages.items()
        ).encode()


def start_stage_clock() -> StageClock:
    """A new clock for the request running in this context (and the tasks it starts)."""
    clock = StageClock()
    _clock.set(clock)
    return clock


def mark_stage(stage: str) -> None:
    """End ``stage`` of the current request, if it has a clock (a worker's model calls have none)."""
    clock = _clock.get()
    if clock is not None:
        clock.mark(stage)
