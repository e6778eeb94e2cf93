"""Function tools: declared by the tenant, executed by the client through ``submit_tool_outputs``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.tools.base import RetrySemantics, ToolContext, ToolDefinition, ToolKind, ToolResult

__all__ = ["FunctionTool"]


class FunctionTool:
    """A tool whose calls the run hands to the client (``requires_action``); the worker never runs it.

    Retry guarantee: the worker has no side effect to repeat. The client receives the pending calls and
    submits all outputs in one request; the run accepts one set of outputs per call id.
    """

    kind = ToolKind.FUNCTION

    def __init__(
        self, name: str, parameters: dict[str, Any], *, description: str = "", requires_approval: bool = False
    ) -> None:
        self.definition = ToolDefinition(name=name, description=description, parameters=parameters)
        self.requires_approval = requires_approval

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return RetrySemantics.AT_MOST_ONCE

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        raise ToolExecutionError(f"function tool {self.definition.name!r} is executed by the client")
