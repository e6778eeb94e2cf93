"""The ``current_time`` built-in, reading an injected clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.tools.base import RetrySemantics, ToolContext, ToolDefinition, ToolKind, ToolResult

__all__ = ["Clock", "CurrentTimeTool", "utc_now"]

#: Returns the current time as an aware ``datetime``.
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock in UTC (the default clock)."""
    return datetime.now(UTC)


class CurrentTimeTool:
    """Tells the model the current date and time, in UTC or an IANA time zone. Idempotent."""

    kind = ToolKind.BUILTIN

    def __init__(self, *, clock: Clock = utc_now, name: str = "current_time", requires_approval: bool = False) -> None:
        self._clock = clock
        self.requires_approval = requires_approval
        self.definition = ToolDefinition(
            name=name,
            description="Return the current date and time (ISO 8601), in UTC or the given IANA time zone.",
            parameters={
                "type": "object",
                "properties": {"timezone": {"type": "string", "description": "e.g. 'Europe/Paris'; default UTC"}},
                "additionalProperties": False,
            },
        )

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return RetrySemantics.IDEMPOTENT

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        now = self._clock()
        zone_name = str(arguments.get("timezone") or "UTC")
        try:
            zone = ZoneInfo(zone_name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolExecutionError(f"unknown time zone {zone_name!r}") from None
        local = now.astimezone(zone)
        return ToolResult.from_value({"datetime": local.isoformat(), "timezone": zone_name, "unix": now.timestamp()})
