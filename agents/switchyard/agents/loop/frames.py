"""Agents called as tools and agents judging guardrails (conversations of their own within a run: frames), and
handoffs between agents."""

from __future__ import annotations

from typing import Literal

from switchyard.agents.guardrails import first_trip, verdict_trip
from switchyard.agents.loop.parts import MAX_FRAMES, WITHHELD_ANSWER, LoopParts, acting_agent
from switchyard.agents.messages import Message, ToolCall
from switchyard.agents.spec import AgentGuardrail
from switchyard.agents.state import (
    Frame,
    RunState,
    RunStatus,
    Step,
    StepStatus,
)
from switchyard.agents.team import AgentTool, HandoffTool, handoff_output
from switchyard.agents.tools.base import ToolKind, ToolResult
from switchyard.agents.workflows.spec import AgentNode


class Frames(LoopParts):
    """Handoffs, agents called as tools (frames) and agent guardrails' judges (frames of their own)."""

    def _hand_off(self, state: RunState, call: ToolCall, tool: HandoffTool, *, now_ms: int) -> None:
        """Record the transfer as a completed tool call; the run goes on as the target, within ``max_handoffs``."""
        done = sum(1 for s in state.steps if s.tool_kind is ToolKind.HANDOFF and not s.is_error)
        target = self.members.get(tool.target)
        if target is None:
            result = ToolResult(f"the agent {tool.target!r} is not available", is_error=True)
        elif done >= self.spec.limits.max_handoffs:
            result = ToolResult(f"no more handoffs: this run made {done}, its limit", is_error=True)
        else:
            result = ToolResult(handoff_output(target.spec.name))
        self._record_immediate(state, call, result, now_ms)
        if result.is_error:
            return
        if state.frames:  # an agent called as a tool hands off within its own conversation
            state.frames[-1].agent = tool.target
        else:
            state.active_agent = tool.target

    def _open_frames(self, state: RunState, now_ms: int) -> None:
        """Start the first agent tool call of this conversation that waits for its agent (one frame at a time)."""
        depth = len(state.frames)
        opened = {frame.step_id for frame in state.frames}
        for step in state.steps:
            if step.tool_kind is not ToolKind.AGENT or step.status is not StepStatus.IN_PROGRESS:
                continue
            if step.depth != depth or step.id in opened:
                continue
            assert step.tool_call is not None
            target = self.members.get(self._target_of(step) or "")
            task = str(step.tool_call.parsed_arguments().get("input", ""))
            refusal: str | None = None
            if target is None:
                refusal = f"the agent behind {step.tool_call.name!r} is not available"
            elif depth >= MAX_FRAMES:
                refusal = f"agents called as tools nest at most {MAX_FRAMES} deep"
            elif (trip := first_trip(target.spec.guardrails.input, task)) is not None:
                refusal = trip.message("input")
            if refusal is not None or target is None:
                self._complete_tool_step(state, step, ToolResult(refusal or "", is_error=True), now_ms)
                continue
            first = Message.user(task).model_copy(update={"id": f"msg_{step.id}_input"})
            state.frames.append(Frame(step_id=step.id, agent=target.agent_id, messages=[first]))
            self._bump(state)
            self._open_judge(state, "input", after=-1, text=task, answer=None)  # its agent's judges rule first
            return

    def _target_of(self, step: Step) -> str | None:
        """The agent an agent tool's call (or a workflow's agent node) runs."""
        assert step.tool_call is not None
        if self._is_node(step):
            assert self.spec.workflow is not None
            node = self.spec.workflow.node(step.tool_call.name)
            return node.agent_id if isinstance(node, AgentNode) else None
        tool = self.tools_of(step.agent).get(step.tool_call.name)
        return tool.target if isinstance(tool, AgentTool) else None

    def _judges(self, state: RunState, guarding: str) -> list[AgentGuardrail | None]:
        """The guardrails, by index (``None`` for those checked without a judge), that the next judge rules for: the
        innermost frame's agent's (an agent called as a tool, or a workflow's node), on its task or its answer; else
        the run's: its own agent's on the run's input, the answering agent's on the answer."""
        if state.frames:
            spec = self.acting(state.frames[-1].agent)[0]
        else:
            spec = self.spec if guarding == "input" else self.acting(acting_agent(state))[0]
        checks = spec.guardrails.input if guarding == "input" else spec.guardrails.output
        return [g if isinstance(g, AgentGuardrail) else None for g in checks]

    def _open_judge(
        self, state: RunState, guarding: Literal["input", "output"], *, after: int, text: str, answer: Message | None
    ) -> bool:
        """Open a frame for the next agent guardrail after index ``after`` on ``text``; whether there was one."""
        for index, judge in enumerate(self._judges(state, guarding)):
            if index <= after or judge is None:
                continue
            owner = (state.frames[-1].step_id if state.frames else None) or state.run_id
            first = Message.user(text).model_copy(update={"id": f"msg_{owner}_{guarding}_judge_{index}"})
            frame = Frame(agent=judge.agent_id, messages=[first], guarding=guarding, guardrail=index, answer=answer)
            state.frames.append(frame)
            self._bump(state)
            return True
        return False

    def _judged(self, state: RunState, verdict: Message, now_ms: int) -> RunState:
        """A judge answered: the text goes on to the next judge, or on (a held answer is given); or what it guarded
        stops: the run (failed), or the call of the agent in the frame below (its output an error)."""
        frame = state.frames.pop()
        assert frame.guarding is not None
        judge = self._judges(state, frame.guarding)[frame.guardrail]
        assert judge is not None
        trip = verdict_trip(judge, verdict.content or "")
        if trip is not None and state.frames:
            self._end_frame(state, ToolResult(trip.message(frame.guarding), is_error=True), now_ms)
            return state
        if trip is not None:
            if frame.answer is not None:
                state.messages.append(frame.answer.model_copy(update={"content": WITHHELD_ANSWER}))
            state, _ = self._tripped(state, trip, frame.guarding, now_ms)
            return state
        text = frame.messages[0].content or ""
        if self._open_judge(state, frame.guarding, after=frame.guardrail, text=text, answer=frame.answer):
            return state
        if frame.answer is not None and state.frames:
            self._end_frame(state, ToolResult(frame.answer.content or ""), now_ms)
        elif frame.answer is not None:
            state.messages.append(frame.answer)
            state.status = RunStatus.COMPLETED
            state.completed_at_ms = now_ms
        return state

    def _close_frame(self, state: RunState, answer: Message, now_ms: int) -> None:
        """The agent of the innermost frame answered: its answer, once its output guardrails (and judges) pass, is
        the output of the call that started it, in the caller's conversation."""
        spec = self.acting(state.frames[-1].agent)[0]
        text = answer.content or ""
        trip = first_trip(spec.guardrails.output, text)
        if trip is not None:
            self._end_frame(state, ToolResult(trip.message("output"), is_error=True), now_ms)
        elif not self._open_judge(state, "output", after=-1, text=text, answer=answer):
            self._end_frame(state, ToolResult(text), now_ms)

    def _end_frame(self, state: RunState, result: ToolResult, now_ms: int) -> None:
        """Close the innermost frame (an agent called as a tool): ``result`` is its call's."""
        frame = state.frames.pop()
        assert frame.step_id is not None  # (judges close in _judged)
        self._complete_tool_step(state, state.step(frame.step_id), result, now_ms)
