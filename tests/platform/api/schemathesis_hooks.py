"""Schemathesis hooks of test_schemathesis.py (``SCHEMATHESIS_HOOKS``): a fresh ``Idempotency-Key`` per request,
and the stateful phase's resource-availability check told a 404 for the body apart from one for the path.

Generated keys repeat (``"0"``, ``"a"``), and the server rightly answers a repeated key with the first answer, or
422 when the body differs: the run would then test the idempotency layer's replays instead of the routes. Keys
longer than the server accepts are left as generated, so that refusal is still tested.
"""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis
from schemathesis.specs.openapi.checks import ensure_resource_availability

from switchyard.platform.http.openapi import MAX_KEY_LENGTH


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    key = (case.headers or {}).get("Idempotency-Key")
    if isinstance(key, str) and len(key) <= MAX_KEY_LENGTH:
        case.headers["Idempotency-Key"] = f"schemathesis-{uuid.uuid4()}"


@schemathesis.check
def created_resource_is_available(ctx: Any, response: Any, case: Any) -> bool | None:
    """Schemathesis's ``ensure_resource_availability`` (ST302), except for a 404 that names a field of the body.

    The built-in check takes any 404 right after a POST that created something, on a path under it, for the
    created resource gone missing. A run on a just-created thread can rightly answer 404 for what its body names
    (``{"param": "agent_version"}``: the agent has no such version); that 404 is the body's, not the thread's. A 404
    naming the path's resource, or nothing, still fails exactly as the built-in check fails it.
    """
    if response.status_code == 404 and _names_a_body_field(response, case):
        return None
    return ensure_resource_availability(ctx, response, case)


def _names_a_body_field(response: Any, case: Any) -> bool:
    try:
        param = response.json()["error"]["param"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(case.body, dict) and isinstance(param, str) and param in case.body
