"""Multi-agent workflows: a spec (a graph of agent calls, decisions, bounded loops and approvals over typed
state), a small safe expression and template language, and the pure interpreter a worker drives.

Nothing here performs I/O: the platform runs the agents a :class:`RunAgent` asks for and the tools a
:class:`CallTool` asks for, asks people for the approvals an :class:`AwaitApproval` asks for, and stores the
:class:`WorkflowState` after every transition.
"""

from __future__ import annotations

from switchyard.agents.workflows.expressions import (
    MAX_VALUE_SIZE,
    MAX_WORK_UNITS,
    Expression,
    Scope,
    WorkBudget,
    parse,
    to_text,
    truthy,
)
from switchyard.agents.workflows.machine import (
    MAX_TRAIL_ENTRIES,
    MAX_TRANSITIONS,
    AwaitApproval,
    CallTool,
    RunAgent,
    TrailEntry,
    WorkflowAction,
    WorkflowError,
    WorkflowFinished,
    WorkflowState,
    WorkflowStatus,
    advance,
    fail,
    record_approval,
    record_output,
    start,
)
from switchyard.agents.workflows.spec import (
    AgentNode,
    EndNode,
    FileSearchNode,
    FunctionNode,
    GuardrailNode,
    IfElseNode,
    McpNode,
    SetStateNode,
    StateVar,
    TransformNode,
    UserApprovalNode,
    WhileNode,
    WorkflowNode,
    WorkflowSpec,
)
from switchyard.agents.workflows.syntax import (
    MAX_EXPRESSION_CHARS,
    MAX_EXPRESSION_NODES,
    MAX_NESTING,
    ExpressionError,
)
from switchyard.agents.workflows.templates import parse_template, render

__all__ = [
    "MAX_EXPRESSION_CHARS",
    "MAX_EXPRESSION_NODES",
    "MAX_NESTING",
    "MAX_TRAIL_ENTRIES",
    "MAX_TRANSITIONS",
    "MAX_VALUE_SIZE",
    "MAX_WORK_UNITS",
    "AgentNode",
    "AwaitApproval",
    "CallTool",
    "EndNode",
    "Expression",
    "ExpressionError",
    "FileSearchNode",
    "FunctionNode",
    "GuardrailNode",
    "IfElseNode",
    "McpNode",
    "RunAgent",
    "Scope",
    "SetStateNode",
    "StateVar",
    "TrailEntry",
    "TransformNode",
    "UserApprovalNode",
    "WhileNode",
    "WorkBudget",
    "WorkflowAction",
    "WorkflowError",
    "WorkflowFinished",
    "WorkflowNode",
    "WorkflowSpec",
    "WorkflowState",
    "WorkflowStatus",
    "advance",
    "fail",
    "parse",
    "parse_template",
    "record_approval",
    "record_output",
    "render",
    "start",
    "to_text",
    "truthy",
]
