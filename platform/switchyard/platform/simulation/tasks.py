"""Jobs of configuration searches: ``simulate.evaluate`` runs the simulator's ``evaluate`` on one configuration.

Routed to ``switchyard.simulate``, the queue every ``switchyard worker`` takes last (``worker/celery_app.py``), so a
search never delays tenants' runs waiting in the queues before it. The job is a pure function of its JSON arguments
(``search.evaluation_args``: the configuration, the workload's requests, the SLO and the search settings) with no side
effects: a redelivered job computes the same result again, and the search reads whichever copy answers first.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from switchyard.accelerator.sim.search import evaluate_json

__all__ = ["evaluate_configuration"]


@shared_task(name="simulate.evaluate")
def evaluate_configuration(
    configuration: dict[str, Any], requests: list[dict[str, Any]], slo: dict[str, Any], settings: dict[str, Any]
) -> dict[str, Any]:
    """The configuration's max rate within the SLO and its cost there, as ``ConfigResult.to_dict()``."""
    return evaluate_json(configuration, requests, slo, settings)
