"""A reference async driver for the run loop: model calls and tool calls at the edge, checkpoints after each.

The platform's Celery task can use :func:`drive_run` as it is (passing a ``checkpoint`` that writes the
state to the database in the run's transaction) or copy its shape.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import anyio

from switchyard.agents.errors import ModelCallInterrupted, ModelCallRefused, ToolExecutionError
from switchyard.agents.loop import RunLoop
from switchyard.agents.messages import Message
from switchyard.agents.model import Model
from switchyard.agents.state import Action, AwaitClient, CallModel, ExecuteTools, RunFinished, RunState, ToolInvocation
from switchyard.agents.tools.base import ToolContext, ToolResult

__all__ = ["Checkpoint", "MillisecondClock", "drive_run", "execute_tool", "wall_clock_ms"]

#: Persists a state; called after every transition, before the action the state asks for is performed.
Checkpoint = Callable[[RunState], Awaitable[None]]
#: The current time in integer milliseconds since the epoch (UTC).
MillisecondClock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


async def execute_tool(loop: RunLoop, invocation: ToolInvocation, context: ToolContext) -> ToolResult:
    """Run one worker-side tool call; failures become error outputs the model can read."""
    tool = loop.tools_of(invocation.agent).get(invocation.tool_call.name)
    if tool is None:
        return ToolResult(f"unknown tool {invocation.tool_call.name!r}", is_error=True)
    try:
        return await tool.call(dict(invocation.arguments), context)
    except ToolExecutionError as exc:
        return ToolResult(str(exc), is_error=True)
    except Exception as exc:  # a tool bug must not kill the run; the model sees the failure
        return ToolResult(f"tool failed: {type(exc).__name__}: {exc}", is_error=True)


async def _noop_checkpoint(state: RunState) -> None:
    return None


async def drive_run(
    loop: RunLoop,
    state: RunState,
    *,
    thread: Sequence[Message],
    model: Model,
    checkpoint: Checkpoint = _noop_checkpoint,
    clock_ms: MillisecondClock = wall_clock_ms,
    tenant_id: str = "",
    cancel_requested: Callable[[], Awaitable[bool]] | None = None,
) -> tuple[RunState, Action]:
    """Advance ``state`` until the run waits for the client or finishes; return the last state and action.

    Model calls are bounded by the run's remaining wall time. A model error fails the run with
    ``last_error.code == "model_error"``; a refused call (:class:`ModelCallRefused`) with the refusal's
    code. ``cancel_requested`` is polled between transitions.
    """
    while True:
        if cancel_requested is not None and await cancel_requested():
            state = loop.cancel(state, now_ms=clock_ms())
            await checkpoint(state)
            return state, RunFinished(status=state.status)
        state, action = loop.advance(state, thread=thread, now_ms=clock_ms())
        await checkpoint(state)
        if isinstance(action, AwaitClient | RunFinished):
            return state, action
        if isinstance(action, CallModel):
            started = state.started_at_ms if state.started_at_ms is not None else clock_ms()
            remaining_s = max(0.0, loop.spec.limits.timeout_s - (clock_ms() - started) / 1000)
            try:
                with anyio.fail_after(remaining_s):
                    response = await model.request(action.request)
            except TimeoutError:
                continue  # advance() sees the timeout and stops the run as incomplete
            except ModelCallInterrupted:
                raise  # not the run's fault: it resumes from this checkpoint
            except Exception as exc:
                code, message = (
                    (exc.code, str(exc))
                    if isinstance(exc, ModelCallRefused)
                    else ("model_error", f"{type(exc).__name__}: {exc}")
                )
                state = loop.fail(state, code=code, message=message, now_ms=clock_ms())
                await checkpoint(state)
                return state, RunFinished(status=state.status)
            if response.finish_reason == "cancelled":
                # the model call was stopped because the run was cancelled: the run ends so, the call's compute billed
                state = loop.cancel(state, now_ms=clock_ms())
            state = loop.record_model_response(state, action.step_id, response, now_ms=clock_ms())
            await checkpoint(state)
        elif isinstance(action, ExecuteTools):
            for invocation in action.invocations:
                context = ToolContext(run_id=state.run_id, call_id=invocation.tool_call.id, tenant_id=tenant_id)
                result = await execute_tool(loop, invocation, context)
                state = loop.record_tool_result(state, invocation.step_id, result, now_ms=clock_ms())
                await checkpoint(state)
