"""An audit log's rows as CSV, safe to open in a spreadsheet.

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return, which some
read past) as a formula, and an audit row holds text anyone could choose: a key's name, an e-mail, a reason. Such a
cell is written with a leading ``'``, which spreadsheets show as text (OWASP's advice for CSV injection).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from switchyard.platform.audit.actors import ActorName
from switchyard.platform.models import AuditEvent, OperatorAuditEvent

__all__ = ["CSV_COLUMNS", "events_csv", "spreadsheet_safe"]

CSV_COLUMNS = (
    "created_at",
    "action",
    "actor_id",
    "actor",
    "actor_kind",
    "target_type",
    "target_id",
    "details",
    "request_id",
)
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: str) -> str:
    """``value``, with a leading ``'`` when a spreadsheet would read it as a formula."""
    return f"'{value}" if value.startswith(_FORMULA_STARTS) else value


def events_csv(events: Iterable[AuditEvent | OperatorAuditEvent], actors: Mapping[str, ActorName]) -> str:
    """``events`` as CSV (a header row, then one row each, in the order given); times are UTC ISO 8601."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for event in events:
        actor = actors.get(event.actor)
        cells: list[Any] = [
            event.created_at.isoformat(),
            event.action,
            event.actor,
            actor.label if actor else event.actor,
            actor.kind.value if actor else "",
            event.target_type,
            event.target_id,
            json.dumps(event.details, sort_keys=True, default=str) if event.details else "",
            event.request_id or "",
        ]
        writer.writerow([spreadsheet_safe(str(cell)) for cell in cells])
    return out.getvalue()
