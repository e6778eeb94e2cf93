"""Switchyard agents: agent specs, the run loop (a pure state machine) and tools.

The platform drives a run with :class:`RunLoop` (see :mod:`switchyard.agents.loop`), persisting the
:class:`RunState` after every transition; :func:`drive_run` is a reference async driver.
"""

from __future__ import annotations

from switchyard.agents.context import AssembledContext, TokenCounter, assemble_context
from switchyard.agents.errors import (
    AgentsError,
    ContextOverflowError,
    InvalidTransitionError,
    ModelCallInterrupted,
    ModelCallRefused,
    SSRFBlockedError,
    ToolExecutionError,
    ToolOutputsError,
)
from switchyard.agents.events import RunEvent, events_between, run_summary
from switchyard.agents.loop import INTERRUPTED_OUTPUT, RunLoop
from switchyard.agents.messages import Message, ToolCall, Usage
from switchyard.agents.model import (
    FunctionModel,
    Model,
    ModelRequest,
    ModelResponse,
    TestModel,
    default_token_counter,
)
from switchyard.agents.pool_model import PoolModel, pool_token_counter
from switchyard.agents.runner import drive_run, execute_tool
from switchyard.agents.spec import (
    AgentSpec,
    CalculatorToolSpec,
    CurrentTimeToolSpec,
    FunctionToolSpec,
    Guardrails,
    GuardrailSpec,
    HandoffSpec,
    HttpRequestToolSpec,
    McpToolSpec,
    ModelParams,
    RunLimits,
    ToolSpec,
)
from switchyard.agents.state import (
    TERMINAL_STATUSES,
    Action,
    AwaitClient,
    CallModel,
    ExecuteTools,
    RequiredAction,
    RunError,
    RunFinished,
    RunState,
    RunStatus,
    Step,
    StepStatus,
    StepType,
    ToolInvocation,
)
from switchyard.agents.tools import (
    RetrySemantics,
    SSRFGuard,
    StaticResolver,
    Tool,
    ToolKind,
    ToolRegistry,
    ToolResult,
    build_tools,
)

__all__ = [
    "INTERRUPTED_OUTPUT",
    "TERMINAL_STATUSES",
    "Action",
    "AgentSpec",
    "AgentsError",
    "AssembledContext",
    "AwaitClient",
    "CalculatorToolSpec",
    "CallModel",
    "ContextOverflowError",
    "CurrentTimeToolSpec",
    "ExecuteTools",
    "FunctionModel",
    "FunctionToolSpec",
    "GuardrailSpec",
    "Guardrails",
    "HandoffSpec",
    "HttpRequestToolSpec",
    "InvalidTransitionError",
    "McpToolSpec",
    "Message",
    "Model",
    "ModelCallInterrupted",
    "ModelCallRefused",
    "ModelParams",
    "ModelRequest",
    "ModelResponse",
    "PoolModel",
    "RequiredAction",
    "RetrySemantics",
    "RunError",
    "RunEvent",
    "RunFinished",
    "RunLimits",
    "RunLoop",
    "RunState",
    "RunStatus",
    "SSRFBlockedError",
    "SSRFGuard",
    "StaticResolver",
    "Step",
    "StepStatus",
    "StepType",
    "TestModel",
    "TokenCounter",
    "Tool",
    "ToolCall",
    "ToolExecutionError",
    "ToolInvocation",
    "ToolKind",
    "ToolOutputsError",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "assemble_context",
    "build_tools",
    "default_token_counter",
    "drive_run",
    "events_between",
    "execute_tool",
    "pool_token_counter",
    "run_summary",
]
