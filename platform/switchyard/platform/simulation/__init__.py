"""Configuration searches on the workers: ``simulate.evaluate`` jobs (``tasks``) and the evaluator that sends a
search's waves to them and collects the results (``dispatch``), for ``switchyard simulate search --workers celery``.

Also the operator console's capacity planning on a tenant's own traffic: the usage ledger read back as a workload
(``traffic``) and a bounded search over it, run off the event loop (``capacity``); import them from their modules."""

from __future__ import annotations

from switchyard.platform.simulation.dispatch import EVALUATE_TASK, CeleryWaves

__all__ = ["EVALUATE_TASK", "CeleryWaves"]
