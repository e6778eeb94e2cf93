"""A workflow run: the loop follows the workflow's graph (:mod:`switchyard.agents.workflows.machine`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from switchyard.agents.loop.frames import Frames
from switchyard.agents.messages import Message, ToolCall
from switchyard.agents.state import (
    Action,
    AwaitClient,
    RunError,
    RunFinished,
    RunState,
    RunStatus,
    Step,
    StepStatus,
    StepType,
)
from switchyard.agents.tools.base import RetrySemantics, ToolKind, ToolResult
from switchyard.agents.workflows import machine as workflow


class WorkflowNodes(Frames):
    """Each step of a workflow run: its agent nodes as frames, its approvals as required actions, its end."""

    def _next_node(self, state: RunState, thread: Sequence[Message], now_ms: int) -> tuple[RunState, Action]:
        """Take the workflow to its next agent, approval or end."""
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

    def _node_answered(self, state: RunState, step: Step, result: ToolResult, now_ms: int) -> None:
        """An agent node's agent answered (or could not be asked): the workflow records it and goes on."""
        assert self.spec.workflow is not None
        assert state.workflow is not None
        assert step.tool_call is not None
        step.status = StepStatus.FAILED if result.is_error else StepStatus.COMPLETED
        step.completed_at_ms = now_ms
        step.output = result.output
        step.is_error = result.is_error
        node = step.tool_call.name
        if result.is_error:
            state.workflow = workflow.fail(state.workflow, "agent_error", f"node {node!r}: {result.output}")
        else:
            state.workflow = workflow.record_agent_output(self.spec.workflow, state.workflow, node, result.output)
        self._bump(state)


def _approval_id(state: RunState) -> str:
    """The id of the call a workflow's approval is asked for (stable until the workflow moves on, and across the
    responses that continue one another)."""
    assert state.workflow is not None
    return f"approve_{state.workflow.node}_{state.workflow.transitions}"
