"""Configuration searches on the workers: ``simulate.evaluate`` jobs (``tasks``) and the evaluator that sends a
search's waves to them and collects the results (``dispatch``), for ``switchyard simulate search --workers celery``."""

from __future__ import annotations

from switchyard.platform.simulation.dispatch import EVALUATE_TASK, CeleryWaves

__all__ = ["EVALUATE_TASK", "CeleryWaves"]
