"""One admission path for every call to a model: chat completions, agent runs, and what comes next.

A caller finds the deployment the tenant may use (:func:`model_backend`, 404 ``model_not_found``), sizes the
call (:func:`refuse_oversized` for a request a client sent as is, :func:`most_output_tokens`), and asks
:meth:`Admission.admit`: the call must fit the tenant's token rate at all (400 ``request_exceeds_token_limit``),
then takes its API key's request rate and its tenant's token rate (429), one of the tenant's requests in flight
(429 ``concurrency_limit_exceeded``) and a hold on every budget that applies (402). A refusal at any step gives
back what the steps before it took, so it changes nothing. An HTTP request answers a refusal as it is; background
work waits instead (:func:`admit_waiting`). When the call ends, :meth:`Admission.finish` gives its slot back and
releases its budget hold unless the call was billed.
"""

from __future__ import annotations

from switchyard.platform.admission.access import ModelNotFound, may_use, model_backend, served_models
from switchyard.platform.admission.budget_holds import BUDGET_CACHE_S, exceeds_hold, held_chip_us
from switchyard.platform.admission.calls import ModelCall, most_output_tokens, refuse_oversized
from switchyard.platform.admission.refusals import LimitsOutage, NoRateCard, RequestExceedsTokenLimit, TryLater
from switchyard.platform.admission.service import Admission, Holds, admission_for
from switchyard.platform.admission.waiting import admit_waiting

__all__ = [
    "BUDGET_CACHE_S",
    "Admission",
    "Holds",
    "LimitsOutage",
    "ModelCall",
    "ModelNotFound",
    "NoRateCard",
    "RequestExceedsTokenLimit",
    "TryLater",
    "admission_for",
    "admit_waiting",
    "exceeds_hold",
    "held_chip_us",
    "may_use",
    "model_backend",
    "most_output_tokens",
    "refuse_oversized",
    "served_models",
]
