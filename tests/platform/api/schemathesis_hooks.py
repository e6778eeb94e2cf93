"""Schemathesis hooks of test_schemathesis.py (``SCHEMATHESIS_HOOKS``): a fresh ``Idempotency-Key`` per request.

Generated keys repeat (``"0"``, ``"a"``), and the server rightly answers a repeated key with the first answer, or
422 when the body differs: the run would then test the idempotency layer's replays instead of the routes. Keys
longer than the server accepts are left as generated, so that refusal is still tested.
"""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis

from switchyard.platform.http.idempotency import MAX_KEY_LENGTH


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    key = (case.headers or {}).get("Idempotency-Key")
    if isinstance(key, str) and len(key) <= MAX_KEY_LENGTH:
        case.headers["Idempotency-Key"] = f"schemathesis-{uuid.uuid4()}"
