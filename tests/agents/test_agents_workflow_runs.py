"""A workflow driven by the run loop: each agent node runs its agent in a frame, a user_approval node waits for the
client, the output is the run's answer; a run stopped at any checkpoint resumes where it was."""

from __future__ import annotations

import json

from switchyard.agents import (
    AgentSpec,
    AwaitClient,
    FunctionModel,
    Message,
    ModelRequest,
    RunLoop,
    RunState,
    RunStatus,
    StepType,
    ToolRegistry,
    drive_run,
)
from switchyard.agents.team import Member
from tests.support.workflows import support_workflow

ANSWERS = {
    "m-triage": '{"category": "billing"}',
    "m-writer": ["Sorry, we will look.", "You get a refund."],
    "m-general": "Here is how it works.",
}


def _loop() -> RunLoop:
    members = {
        agent_id: Member(agent_id, 2, AgentSpec(name=agent_id, model=model, instructions=f"You are {agent_id}."),
                         ToolRegistry(), 8192)
        for agent_id, model in (("agent_triage", "m-triage"), ("agent_writer", "m-writer"),
                                ("agent_general", "m-general"))
    }  # fmt: skip
    spec = AgentSpec(name="support", model="m-triage", workflow=support_workflow())
    return RunLoop(spec, ToolRegistry(), context_window_tokens=8192, members=members)


def _model() -> tuple[FunctionModel, list[ModelRequest]]:
    asked: list[ModelRequest] = []
    drafts = list(ANSWERS["m-writer"])

    def answer(request: ModelRequest) -> str:
        asked.append(request)
        if request.model == "m-writer":
            return drafts.pop(0)
        return str(ANSWERS[request.model])

    return FunctionModel(answer, chip_us_per_token=1), asked


THREAD = [Message.user("I was charged twice")]


async def test_a_workflow_runs_its_agents_loops_and_waits_for_approval() -> None:
    loop, (model, asked) = _loop(), _model()
    state, action = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=THREAD, model=model)
    assert isinstance(action, AwaitClient)
    assert state.status is RunStatus.REQUIRES_ACTION
    (approval,) = action.required_action.tool_calls
    assert approval.name == "approve_review"
    assert json.loads(approval.arguments) == {"message": "Send this reply?\nYou get a refund."}
    assert [r.model for r in asked] == ["m-triage", "m-writer", "m-writer"]  # the loop drafted until "refund"
    assert asked[1].messages[-1].content == "Write a reply to: I was charged twice (round 1)"
    nodes = [(s.tool_call.name, s.output) for s in state.steps if s.type is StepType.TOOL_CALL and s.tool_call]
    assert nodes == [
        ("triage", '{"category": "billing"}'),
        ("draft", "Sorry, we will look."),
        ("draft", "You get a refund."),
    ]
    assert {s.agent for s in state.steps if s.type is StepType.MODEL_CALL} == {"agent_triage", "agent_writer"}
    approved = loop.submit_approvals(state, {approval.id: True}, now_ms=1)
    final, _ = await drive_run(loop, approved, thread=THREAD, model=model)
    assert final.status is RunStatus.COMPLETED
    assert final.final_message is not None
    assert final.final_message.content == "You get a refund."
    assert final.workflow is not None
    assert final.workflow.vars["rounds"] == 2


async def test_a_rejected_reply_goes_to_the_general_agent() -> None:
    """(The end node's output is ``state.draft or last_output``: the draft, which the general agent does not change.)"""
    loop, (model, asked) = _loop(), _model()
    state, action = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=THREAD, model=model)
    assert isinstance(action, AwaitClient)
    rejected = loop.submit_approvals(state, {action.required_action.tool_calls[0].id: False}, now_ms=1)
    final, _ = await drive_run(loop, rejected, thread=THREAD, model=model)
    assert final.final_message is not None
    assert final.final_message.content == "You get a refund."
    assert asked[-1].model == "m-general"
    general = final.steps[-2]
    assert (general.tool_call.name if general.tool_call else None, general.output) == (
        "general",
        "Here is how it works.",
    )


async def test_a_workflow_resumes_from_every_checkpoint_billing_each_step_once() -> None:
    """Stop after each stored transition, reload the state from JSON, go on: the same end, each model step once."""
    stored: list[RunState] = []

    async def keep(state: RunState) -> None:
        stored.append(RunState.model_validate(state.model_dump(mode="json")))

    loop, (model, _) = _loop(), _model()
    await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=THREAD, model=model, checkpoint=keep)
    for index, checkpoint in enumerate(stored):
        fresh, _ = _model()
        state, action = await drive_run(_loop(), checkpoint, thread=THREAD, model=_replaying(fresh, checkpoint))
        assert isinstance(action, AwaitClient), index
        billed = [s.id for s in state.steps if s.usage is not None]
        assert len(billed) == len(set(billed)) == 3, index


def _replaying(model: FunctionModel, checkpoint: RunState) -> FunctionModel:
    """The scripted model, with the drafts already answered before ``checkpoint`` taken off its script."""
    done = sum(1 for s in checkpoint.steps if s.model == "m-writer" and s.usage is not None)
    drafts = list(ANSWERS["m-writer"])[done:]

    def answer(request: ModelRequest) -> str:
        return drafts.pop(0) if request.model == "m-writer" else str(ANSWERS[request.model])

    return FunctionModel(answer, chip_us_per_token=1)


async def test_a_workflow_fails_when_its_agent_cannot_be_asked() -> None:
    spec = AgentSpec(name="support", model="m-triage", workflow=support_workflow())
    loop = RunLoop(spec, ToolRegistry(), context_window_tokens=8192)  # no members: the agents are missing
    state, _ = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=THREAD, model=_model()[0])
    assert state.status is RunStatus.FAILED
    assert state.last_error is not None
    assert state.last_error.code == "agent_error"
    assert state.last_error.message.startswith("node 'triage': the agent behind 'triage' is not available")
