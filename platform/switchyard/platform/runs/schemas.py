from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from switchyard.agents import RunState, Step, StepType, Usage
from switchyard.platform.http.bodies import MAX_STORED_INTEGER, REQUEST_BODY
from switchyard.platform.models import Run
from switchyard.platform.threads.schemas import ThreadCreate

__all__ = [
    "ApprovalDecision",
    "RunCreate",
    "RunEvent",
    "RunPromptTokensDetails",
    "RunPublic",
    "RunUsage",
    "StepPublic",
    "SubmitApprovals",
    "SubmitToolOutputs",
    "ThreadAndRunCreate",
    "ToolOutput",
]

MultitaskStrategy = Literal["reject", "enqueue", "interrupt"]


class RunCreate(BaseModel):
    """Run an agent over the thread's messages."""

    model_config = REQUEST_BODY

    agent_id: str = Field(examples=["agent_01jd8v0000000000000000000"], description="The agent (or workflow) to run.")
    workflow_id: str | None = Field(
        default=None, examples=["workflow_01jd8v0000000000000000000"], description="A workflow to run, instead."
    )
    # versions are 32-bit integers in the database: a larger one was a 500 there
    agent_version: int | None = Field(
        default=None, ge=1, le=MAX_STORED_INTEGER, description="A version of the agent; default the latest."
    )
    stream: bool = Field(default=False, description="Answer with the run's events as SSE instead of the run.")
    multitask_strategy: MultitaskStrategy = Field(
        default="reject",
        description="When the thread already has an active run: `reject` (409), `enqueue` (start after it), "
        "`interrupt` (cancel it, then start).",
    )
    metadata: dict[str, str] = Field(default_factory=dict, max_length=16)

    @model_validator(mode="before")
    @classmethod
    def _workflow_or_agent(cls, data: Any) -> Any:
        """``workflow_id`` names what runs when ``agent_id`` does not (a workflow is stored as an agent)."""
        if isinstance(data, dict) and data.get("workflow_id") is not None:
            if data.get("agent_id") not in (None, data["workflow_id"]):
                raise ValueError("give agent_id or workflow_id, not both")
            data = {**data, "agent_id": data["workflow_id"]}
        return data


class ThreadAndRunCreate(RunCreate):
    """Create a thread (with its first messages) and run an agent on it, in one call."""

    thread: ThreadCreate = Field(default_factory=ThreadCreate)


class ToolOutput(BaseModel):
    model_config = REQUEST_BODY

    tool_call_id: str = Field(examples=["call_1"], max_length=128)
    output: str = Field(examples=["42"], max_length=1_000_000)


class SubmitToolOutputs(BaseModel):
    """The outputs of every pending function call, in one call."""

    model_config = REQUEST_BODY

    tool_outputs: list[ToolOutput] = Field(
        min_length=1, max_length=128, examples=[[{"tool_call_id": "call_1", "output": "42"}]]
    )
    stream: bool = Field(default=False, description="Answer with the run's further events as SSE.")


class ApprovalDecision(BaseModel):
    model_config = REQUEST_BODY

    tool_call_id: str = Field(examples=["call_1"], max_length=128)
    approve: bool = Field(examples=[True])


class SubmitApprovals(BaseModel):
    """A decision for every tool call awaiting approval, in one call (audited)."""

    model_config = REQUEST_BODY

    approvals: list[ApprovalDecision] = Field(
        min_length=1, max_length=128, examples=[[{"tool_call_id": "call_1", "approve": True}]]
    )


def _time(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


class RunPromptTokensDetails(BaseModel):
    """What the prompt tokens were made of (chat completions' ``usage.prompt_tokens_details``)."""

    cached_tokens: int = Field(
        description="Of `prompt_tokens`, those the serving replicas read from their prefix cache instead of "
        "computing them; `chip_us` already reflects what they cost."
    )


class RunUsage(BaseModel):
    """The tokens of every model call of a run, summed."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: RunPromptTokensDetails

    @classmethod
    def of(cls, usage: Usage) -> RunUsage:
        return cls(
            prompt_tokens=usage.input_tokens,
            completion_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            prompt_tokens_details=RunPromptTokensDetails(cached_tokens=usage.cached_input_tokens),
        )


def _step_usage(usage: Usage) -> dict[str, Any]:
    """A model step's tokens in the Responses API's shape (``input_tokens_details.cached_tokens``)."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
    }


class RunPublic(BaseModel):
    """A run: its status, what it waits for, why it stopped, and its tokens and compute so far."""

    object: Literal["thread.run"] = "thread.run"
    id: str
    thread_id: str
    agent_id: str
    agent_version: int
    status: str = Field(
        description="queued, in_progress, requires_action, cancelling, cancelled, failed, completed, "
        "incomplete or expired"
    )
    required_action: dict[str, Any] | None
    last_error: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None = Field(description="`{reason}`: the limit that stopped the run")
    usage: RunUsage
    chip_us: int = Field(description="Accelerator chip-microseconds of the run's model calls.")
    step_count: int
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    metadata: dict[str, str]

    @classmethod
    def of(cls, row: Run) -> RunPublic:
        state = RunState.model_validate(row.state)
        status = state.status.value
        if row.cancel_requested and status in ("queued", "in_progress"):
            status = "cancelling"
        required = None
        if state.required_action is not None:
            action = state.required_action
            calls = [c.to_openai() for c in action.tool_calls]
            key = "submit_tool_outputs" if action.type == "submit_tool_outputs" else "approval"
            required = {"type": action.type, key: {"tool_calls": calls}, "expires_at": _time(action.expires_at_ms)}
        return cls(
            id=row.id,
            thread_id=row.thread_id,
            agent_id=row.agent_id,
            agent_version=row.agent_version,
            status=status,
            required_action=required,
            last_error=state.last_error.model_dump() if state.last_error else None,
            incomplete_details={"reason": state.incomplete_reason} if state.incomplete_reason else None,
            usage=RunUsage.of(state.usage),
            chip_us=state.chip_us,
            step_count=len(state.steps),
            created_at=row.created_at,
            started_at=_time(state.started_at_ms),
            completed_at=_time(state.completed_at_ms),
            metadata=dict(row.metadata_json or {}),
        )


class RunEvent(BaseModel):
    """The JSON ``data`` of one of a run's server-sent events: ``event:`` names it, ``id:`` is its sequence number.

    The stream ends with ``event: done`` and ``data: [DONE]`` once the run finished or waits for the client.
    """

    model_config = ConfigDict(extra="allow")

    sequence_number: int = Field(description="Resume after it with `starting_after` or `Last-Event-ID`.")


class StepPublic(BaseModel):
    """One model call or tool call of a run, with its timings, tokens and compute."""

    object: Literal["thread.run.step"] = "thread.run.step"
    id: str
    run_id: str
    thread_id: str
    index: int
    type: StepType
    status: str
    agent_id: str = Field(description="the agent that acted: the run's, or the one it handed off to")
    step_details: dict[str, Any] = Field(
        description="A model call's `model`, `usage` (`input_tokens`, `output_tokens`, `total_tokens` and "
        "`input_tokens_details.cached_tokens`, as the Responses API counts them), `chip_us`, `receipt_id`, "
        "`ttft_ms`, `replica` and `dropped_messages`; a tool call's `tool_call`, `tool_kind`, `retry`, `output` "
        "and `is_error`."
    )
    created_at: datetime
    completed_at: datetime | None
    duration_ms: int | None

    @classmethod
    def of(cls, run: Run, step: Step) -> StepPublic:
        if step.type is StepType.MODEL_CALL:
            details: dict[str, Any] = {
                "model": step.model,
                "usage": _step_usage(step.usage) if step.usage else None,
                "chip_us": step.chip_us,
                "receipt_id": step.receipt_id,
                "ttft_ms": step.ttft_ms,
                "replica": step.replica,
                "dropped_messages": step.dropped_messages,
            }
        else:
            details = {
                "tool_call": step.tool_call.to_openai() if step.tool_call else None,
                "tool_kind": step.tool_kind,
                "retry": step.retry,
                "output": step.output,
                "is_error": step.is_error,
            }
        created = _time(step.created_at_ms)
        assert created is not None
        return cls(
            id=step.id,
            run_id=run.id,
            thread_id=run.thread_id,
            index=step.index,
            type=step.type,
            status=step.status.value,
            agent_id=step.agent or run.agent_id,
            step_details=details,
            created_at=created,
            completed_at=_time(step.completed_at_ms),
            duration_ms=step.duration_ms,
        )
