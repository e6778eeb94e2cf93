"""Send a configuration search's waves to the workers: ``CeleryWaves`` is the simulator's ``WaveEvaluator`` on Celery.

Each configuration of a wave becomes one ``simulate.evaluate`` job (``tasks.py``) on the broker of the platform's
settings; results are yielded as they come back, in whatever order the workers finish them. The search (in the
simulator, which knows nothing of Celery) prunes the next wave against them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from kombu.exceptions import OperationalError

from switchyard.accelerator.errors import SimulatorError
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.search import ConfigResult, SearchSettings, Slo, evaluation_args
from switchyard.accelerator.sim.search_space import Configuration

__all__ = ["EVALUATE_TASK", "CeleryWaves"]

EVALUATE_TASK = "simulate.evaluate"


class CeleryWaves:
    """Evaluates each wave's configurations as ``simulate.evaluate`` jobs sent through ``app`` (a Celery app of
    ``create_celery``, with a result backend), polling their results at most every ``poll_s`` (sooner just after one
    came back: a poll asks the backend once per job out, which costs CPU beside workers). A worker's failure is raised
    as a ``SimulatorError`` naming the configuration; with ``idle_timeout_s``, so is a wait that long for the next
    result (no worker takes the queue). Jobs still out when the search stops are left to finish (the SQLite broker
    cannot revoke them); their results expire with the backend's ``result_expires``."""

    def __init__(self, app: Any, *, poll_s: float = 0.25, idle_timeout_s: float | None = None) -> None:
        self._app = app
        self._poll_s = poll_s
        self._idle_timeout_s = idle_timeout_s

    def __call__(
        self, configs: Sequence[Configuration], workload: Sequence[Request], slo: Slo, settings: SearchSettings
    ) -> Iterator[ConfigResult]:
        try:
            pending = {
                self._app.send_task(EVALUATE_TASK, args=evaluation_args(config, workload, slo, settings)): config
                for config in configs
            }
        except OperationalError as exc:  # the broker refused or could not be reached, after kombu's retries
            raise SimulatorError(f"could not send the configurations to the broker: {exc}") from exc
        waited_since = time.monotonic()
        pause_s = self._poll_s / 8
        while pending:
            ready = [job for job in pending if job.ready()]
            for job in ready:
                config = pending.pop(job)
                try:
                    payload = job.get(timeout=self._poll_s + 10.0)
                except Exception as exc:  # the worker's exception, rebuilt from JSON: any type
                    raise SimulatorError(f"a worker failed to evaluate {config}: {exc}") from exc
                finally:
                    job.forget()  # read once: drop it from the result backend now
                yield ConfigResult.from_dict(payload)
            if ready:
                waited_since = time.monotonic()
                pause_s = self._poll_s / 8  # soon again: results of one wave tend to come in bursts
            elif self._idle_timeout_s is not None and time.monotonic() - waited_since > self._idle_timeout_s:
                raise SimulatorError(
                    f"no result from the workers for {self._idle_timeout_s:g} s ({len(pending)} configurations out): "
                    f"is a `switchyard worker` taking the queue switchyard.simulate on this broker?"
                )
            else:
                time.sleep(pause_s)
                pause_s = min(2 * pause_s, self._poll_s)
