"""A workflow run: the loop follows the workflow's graph (:mod:`switchyard.agents.workflows.machine`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from switchyard.agents.loop.frames import Frames
from switchyard.agents.loop.parts import DENIED_OUTPUT
from switchyard.agents.messages import Message, ToolCall
from switchyard.agents.state import (
    Action,
    AwaitClient,
    ExecuteTools,
    RunError,
    RunFinished,
    RunState,
    RunStatus,
    Step,
    StepType,
)
from switchyard.agents.tools.base import RetrySemantics, ToolKind, ToolResult, mcp_tool_name, validate_arguments
from switchyard.agents.workflows import machine as workflow


class WorkflowNodes(Frames):
    """Each step of a workflow run: its agent nodes as frames, its tool nodes as tool calls, its approvals as required
    actions, its end."""

    def _next_node(self, state: RunState, thread: Sequence[Message], now_ms: int) -> tuple[RunState, Action]:
        """Take the workflow to its next agent, tool, approval or end."""
        graph, flow = self.spec.workflow, state.workflow
        assert graph is not None
        assert flow is not None
        if flow.status is workflow.WorkflowStatus.AWAITING_APPROVAL:
            decision = state.approvals.get(_approval_id(state))
            if decision is None:  # resumed before the person decided: ask again
                return state, self._ask_approval(state, now_ms)
            flow = workflow.record_approval(graph, flow, str(flow.node), decision)
        flow, action = workflow.advance(graph, flow)
        state.workflow = flow
        self._bump(state)
        if isinstance(action, workflow.RunAgent):
            step = self._new_step(state, StepType.TOOL_CALL, now_ms)
            arguments = json.dumps({"input": action.input})
            step.tool_call = ToolCall(id=f"call_{step.id}", name=action.node, arguments=arguments)
            step.tool_kind = ToolKind.AGENT
            step.retry = RetrySemantics.IDEMPOTENT
            self._open_frames(state, now_ms)
            if state.frames:
                return self._next_model_call(state, thread, now_ms)
            return self._next_node(state, thread, now_ms)  # refused: the workflow failed
        if isinstance(action, workflow.CallTool):
            return self._call_tool(state, thread, action, now_ms)
        if isinstance(action, workflow.AwaitApproval):
            return state, self._ask_approval(state, now_ms)
        if action.status is workflow.WorkflowStatus.COMPLETED:
            answer = Message.assistant(action.output or "").model_copy(update={"id": f"msg_{state.run_id}_output"})
            state.messages.append(answer)
            state.status = RunStatus.COMPLETED
            state.completed_at_ms = now_ms
            return state, RunFinished(status=state.status)
        error = flow.error or workflow.WorkflowError(code="workflow_failed", message="the workflow failed")
        stopped, finished = self._stop(state, RunStatus.FAILED, now_ms)
        stopped.last_error = RunError(code=error.code, message=error.message)
        return stopped, finished

    def _ask_approval(self, state: RunState, now_ms: int) -> AwaitClient:
        assert self.spec.workflow is not None
        assert state.workflow is not None
        node = str(state.workflow.node)
        _, action = workflow.advance(self.spec.workflow, state.workflow)  # the same AwaitApproval, its message
        message = action.message if isinstance(action, workflow.AwaitApproval) else ""
        call = ToolCall(id=_approval_id(state), name=f"approve_{node}", arguments=json.dumps({"message": message}))
        return self._require(state, "approval", [call], now_ms)

    def _node_answered(self, state: RunState, step: Step, result: ToolResult) -> None:
        assert self.spec.workflow is not None
        assert state.workflow is not None
        node = str(state.workflow.node)  # (the workflow is at the node whose call this is)
        if result.is_error:
            code = "agent_error" if step.tool_kind is ToolKind.AGENT else "tool_error"
            state.workflow = workflow.fail(state.workflow, code, f"node {node!r}: {result.output}")
        else:
            state.workflow = workflow.record_output(self.spec.workflow, state.workflow, node, result.output)
        self._bump(state)

    def _call_tool(
        self, state: RunState, thread: Sequence[Message], action: workflow.CallTool, now_ms: int
    ) -> tuple[RunState, Action]:
        """A tool node's call: asked of the client (a function tool; an output the thread already brings is taken),
        or run on the worker (after its approval, when the tool asks for one); a call that cannot be made fails the
        workflow with ``tool_error``."""
        assert state.workflow is not None
        label = action.server_label
        name = action.tool if label is None else mcp_tool_name(label, action.tool)
        call_id = f"call_{action.node}_{state.workflow.transitions}"  # the same while the workflow is at the node
        call = ToolCall(id=call_id, name=name, arguments=json.dumps(action.arguments))
        tool = self.tools.get(name)
        refusal: str | None = None
        if tool is None:
            where = "the workflow's tools" if label is None else f"the tools MCP server {label!r} offers"
            refusal = f"{action.tool!r} is not one of {where}"
        elif (invalid := validate_arguments(tool.definition.parameters, action.arguments)) is not None:
            refusal = f"the arguments do not fit the tool: {invalid}"
        elif tool.requires_approval and call_id not in state.approvals:
            return state, self._require(state, "approval", [call], now_ms)
        elif tool.requires_approval and not state.approvals[call_id]:
            refusal = DENIED_OUTPUT
        step = self._new_step(state, StepType.TOOL_CALL, now_ms)
        step.tool_call = call
        step.tool_kind = tool.kind if tool is not None else None
        if refusal is not None or tool is None:
            self._complete_tool_step(state, step, ToolResult(refusal or "", is_error=True), now_ms)
            return self._next_node(state, thread, now_ms)  # the workflow failed
        step.retry = tool.retry_semantics(action.arguments)
        self._bump(state)
        if tool.kind is not ToolKind.FUNCTION:
            return state, ExecuteTools(invocations=(self._invocation(step),))
        given = _answer_given(thread, call_id)
        if given is None:
            return state, self._require(state, "submit_tool_outputs", [call], now_ms)
        self._complete_tool_step(state, step, ToolResult(given), now_ms)
        return self._next_node(state, thread, now_ms)


def _answer_given(thread: Sequence[Message], call_id: str) -> str | None:
    """The output of the call ``call_id`` the thread brings after its last user message (a response continuing
    the one that asked for it, with a ``function_call_output``), or ``None``."""
    for message in reversed(thread):
        if message.role == "user":
            return None
        if message.role == "tool" and message.tool_call_id == call_id:
            return message.content or ""
    return None


def _approval_id(state: RunState) -> str:
    """The id of the call a workflow's approval is asked for (stable until the workflow moves on, and across the
    responses that continue one another)."""
    assert state.workflow is not None
    return f"approve_{state.workflow.node}_{state.workflow.transitions}"
