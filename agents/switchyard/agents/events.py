"""Run events (SSE names) derived from two consecutive run states — a pure function.

Order within a transition: ``queued``/``in_progress`` first, then steps created, messages created and
completed, steps finished, and last ``requires_action`` or the terminal status.

The platform stores and streams these with a ``sequence_number`` of its own; computing them from the
checkpointed states (rather than emitting them from the driver) means a resumed run emits each event once:
the events of a transition are those between the stored state and the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from switchyard.agents.state import RunState, RunStatus, Step, StepStatus

__all__ = ["RunEvent", "events_between", "run_summary"]

_RUN_EVENTS = {
    RunStatus.QUEUED: "thread.run.queued",
    RunStatus.IN_PROGRESS: "thread.run.in_progress",
    RunStatus.REQUIRES_ACTION: "thread.run.requires_action",
    RunStatus.COMPLETED: "thread.run.completed",
    RunStatus.FAILED: "thread.run.failed",
    RunStatus.CANCELLED: "thread.run.cancelled",
    RunStatus.INCOMPLETE: "thread.run.incomplete",
    RunStatus.EXPIRED: "thread.run.expired",
}
_STEP_EVENTS = {
    StepStatus.COMPLETED: "thread.run.step.completed",
    StepStatus.FAILED: "thread.run.step.failed",
    StepStatus.CANCELLED: "thread.run.step.cancelled",
    StepStatus.EXPIRED: "thread.run.step.expired",
}


@dataclass(frozen=True)
class RunEvent:
    """One event: its dotted SSE name and a JSON-able payload."""

    event: str
    data: dict[str, Any]


def run_summary(state: RunState) -> dict[str, Any]:
    """The run fields an event carries (the platform adds its own ids and timestamps)."""
    return {
        "id": state.run_id,
        "status": state.status.value,
        "required_action": state.required_action.model_dump(mode="json") if state.required_action else None,
        "incomplete_reason": state.incomplete_reason,
        "last_error": state.last_error.model_dump(mode="json") if state.last_error else None,
        "usage": state.usage.model_dump(mode="json"),
        "chip_us": state.chip_us,
    }


def _step_data(state: RunState, step: Step) -> dict[str, Any]:
    return {"run_id": state.run_id, **step.model_dump(mode="json")}


def events_between(before: RunState | None, after: RunState) -> list[RunEvent]:
    """The events of the transition ``before → after`` (``before=None``: the run was just created)."""
    events: list[RunEvent] = []
    if before is None:
        events.append(RunEvent("thread.run.created", run_summary(after)))
        previous_steps: dict[str, Step] = {}
        previous_messages = 0
        previous_status: RunStatus | None = None
    else:
        previous_steps = {s.id: s for s in before.steps}
        previous_messages = len(before.messages)
        previous_status = before.status
    status_changed = after.status is not previous_status
    leading = after.status in (RunStatus.QUEUED, RunStatus.IN_PROGRESS)
    if status_changed and leading:
        events.append(RunEvent(_RUN_EVENTS[after.status], run_summary(after)))
    for step in after.steps:
        if step.id not in previous_steps:
            created = step.model_copy(update={"status": StepStatus.IN_PROGRESS, "completed_at_ms": None})
            events.append(RunEvent("thread.run.step.created", _step_data(after, created)))
    for message in after.messages[previous_messages:]:
        data = {"run_id": after.run_id, **message.model_dump(mode="json")}
        events.append(RunEvent("thread.message.created", data))
        events.append(RunEvent("thread.message.completed", data))
    for step in after.steps:
        old = previous_steps.get(step.id)
        was_open = old is None or old.status is StepStatus.IN_PROGRESS
        if was_open and step.status in _STEP_EVENTS:
            events.append(RunEvent(_STEP_EVENTS[step.status], _step_data(after, step)))
    if status_changed and not leading:
        events.append(RunEvent(_RUN_EVENTS[after.status], run_summary(after)))
    return events
