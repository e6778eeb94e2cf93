"""The workflow interpreter as a pure state machine: flows driven by scripted agents, bounded loops, approvals,
failures, resumption, and a state that survives JSON at every step."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.agents import InvalidTransitionError
from switchyard.agents.workflows import (
    MAX_TRAIL_ENTRIES,
    MAX_TRANSITIONS,
    AwaitApproval,
    RunAgent,
    WorkflowAction,
    WorkflowFinished,
    WorkflowSpec,
    WorkflowState,
    WorkflowStatus,
    advance,
    fail,
    record_approval,
    record_output,
    start,
)
from tests.support.workflows import support_workflow

SUPPORT: dict[str, Any] = support_workflow()
SPEC = WorkflowSpec.model_validate(SUPPORT)


def changed(**nodes: dict[str, Any]) -> WorkflowSpec:
    """The support workflow with some nodes' fields replaced."""
    data = {**SUPPORT, "nodes": [{**n, **nodes.get(n["id"], {})} for n in SUPPORT["nodes"]]}
    return WorkflowSpec.model_validate(data)


def round_trips(state: WorkflowState) -> WorkflowState:
    restored = WorkflowState.model_validate(state.model_dump(mode="json"))
    assert restored == state
    return restored


class Driver:
    """Answers each agent with its next scripted answer and each approval with the next decision, restoring the
    state from JSON after every transition (as a worker restoring a checkpoint would)."""

    def __init__(self, spec: WorkflowSpec, answers: dict[str, list[str]], approvals: list[bool] | None = None) -> None:
        self.spec = spec
        self.answers = {agent: list(items) for agent, items in answers.items()}
        self.approvals = list(approvals or [])
        self.agent_calls: list[RunAgent] = []
        self.approval_messages: list[str] = []

    def run(self, input_text: str) -> WorkflowState:
        state = round_trips(start(self.spec, input_text))
        while True:
            state, action = advance(self.spec, state)
            state = round_trips(state)
            if isinstance(action, RunAgent):
                self.agent_calls.append(action)
                answer = self.answers[action.agent_id].pop(0)
                state = round_trips(record_output(self.spec, state, action.node, answer))
            elif isinstance(action, AwaitApproval):
                assert state.status is WorkflowStatus.AWAITING_APPROVAL
                self.approval_messages.append(action.message)
                if not self.approvals:
                    return state
                state = round_trips(record_approval(self.spec, state, action.node, self.approvals.pop(0)))
            else:
                assert action == WorkflowFinished(status=state.status, output=state.output)
                return state


def outcomes(state: WorkflowState) -> list[tuple[str, str]]:
    return [(entry.node, entry.outcome) for entry in state.trail]


def test_a_billing_request_is_triaged_drafted_until_good_approved_and_completed() -> None:
    driver = Driver(
        SPEC,
        {
            "agent_triage": ['{"category": "billing"}'],
            "agent_writer": ["We are sorry.", "We will REFUND you."],
        },
        approvals=[True],
    )
    state = driver.run("Refund my order")
    assert state.status is WorkflowStatus.COMPLETED
    assert state.output == "We will REFUND you."
    assert state.error is None
    assert [(call.node, call.agent_id, call.version, call.input) for call in driver.agent_calls] == [
        ("triage", "agent_triage", None, "Refund my order"),
        ("draft", "agent_writer", 2, "Write a reply to: Refund my order (round 1)"),
        ("draft", "agent_writer", 2, "Write a reply to: Refund my order (round 2)"),
    ]
    assert driver.approval_messages == ["Send this reply?\nWe will REFUND you."]
    assert state.vars == {"triage": {"category": "billing"}, "draft": "We will REFUND you.", "rounds": 2, "good": True}
    assert state.iterations == {}
    assert outcomes(state) == [
        ("triage", "agent answered"),
        ("route", "then"),
        ("drafting", "iteration 1"),
        ("draft", "agent answered"),
        ("check", "set rounds, good"),
        ("drafting", "iteration 2"),
        ("draft", "agent answered"),
        ("check", "set rounds, good"),
        ("drafting", "done"),
        ("review", "approved"),
        ("done", "completed"),
    ]
    assert state.transitions == 10


def test_another_request_goes_to_the_general_agent_with_the_previous_answer_as_input() -> None:
    driver = Driver(SPEC, {"agent_triage": ['{"category": "shipping"}'], "agent_general": ["It ships Monday."]})
    state = driver.run("Where is my parcel?")
    assert [call.input for call in driver.agent_calls] == ["Where is my parcel?", '{"category": "shipping"}']
    assert outcomes(state)[:2] == [("triage", "agent answered"), ("route", "else")]
    assert state.status is WorkflowStatus.COMPLETED
    assert state.output == "It ships Monday."


def test_max_iterations_ends_the_loop() -> None:
    driver = Driver(
        SPEC, {"agent_triage": ['{"category": "billing"}'], "agent_writer": ["no", "still no", "never"]}, [False]
    )
    driver.answers["agent_general"] = ["escalated"]
    state = driver.run("Refund my order")
    assert len([call for call in driver.agent_calls if call.node == "draft"]) == 3
    assert ("drafting", "max_iterations") in outcomes(state)
    assert ("drafting", "iteration 4") not in outcomes(state)
    assert ("review", "rejected") in outcomes(state)
    assert state.vars["rounds"] == 3
    assert state.output == "never"  # the end's template: state.draft, still the last draft


def test_a_loop_entered_again_counts_from_zero() -> None:
    # a rejected draft starts the drafting loop over; an outer loop bounds how often (a bare rejected -> drafting
    # edge would be refused: re-entering a loop through its next edge resets its count)
    spec = WorkflowSpec.model_validate(
        {
            "name": "redraft",
            "start": "attempts",
            "nodes": [
                {"type": "while", "id": "attempts", "condition": "true", "body": "drafting", "max_iterations": 2,
                 "next": "done"},
                {"type": "while", "id": "drafting", "condition": "true", "body": "draft", "max_iterations": 3,
                 "next": "review"},
                {"type": "agent", "id": "draft", "agent_id": "agent_writer", "next": "drafting"},
                {"type": "user_approval", "id": "review", "message": "{{ last_output }}?", "approved": "done",
                 "rejected": "attempts"},
                {"type": "end", "id": "done"},
            ],
        }
    )  # fmt: skip
    driver = Driver(spec, {"agent_writer": [f"draft {i}" for i in range(6)]}, [False, True])
    state = driver.run("x")
    drafting = [outcome for node, outcome in outcomes(state) if node == "drafting"]
    assert drafting == [*[f"iteration {i}" for i in (1, 2, 3)], "max_iterations"] * 2
    assert [outcome for node, outcome in outcomes(state) if node == "attempts"] == ["iteration 1", "iteration 2"]
    assert driver.approval_messages == ["draft 2?", "draft 5?"]
    assert state.status is WorkflowStatus.COMPLETED
    assert state.output == "draft 5"
    assert state.iterations == {"attempts": 2}  # left through review's approved edge, not through its own next


def test_advance_at_an_agent_node_asks_for_the_same_agent_run_again() -> None:
    state = start(SPEC, "Refund my order")
    first, action = advance(SPEC, state)
    again, repeated = advance(SPEC, round_trips(first))
    assert repeated == action
    assert again == first
    assert isinstance(action, RunAgent)
    assert first.transitions == 0


def test_advance_at_an_approval_asks_again_and_a_finished_workflow_stays_finished() -> None:
    driver = Driver(SPEC, {"agent_triage": ['{"category": "billing"}'], "agent_writer": ["refund"]})
    waiting = driver.run("x")
    again, action = advance(SPEC, waiting)
    assert action == AwaitApproval(node="review", message="Send this reply?\nrefund")
    assert again == waiting
    done, _ = advance(SPEC, record_approval(SPEC, waiting, "review", True))
    finished, final = advance(SPEC, done)
    assert final == WorkflowFinished(status=WorkflowStatus.COMPLETED, output="refund")
    assert finished == done


def test_transitions_never_mutate_their_input() -> None:
    state = start(SPEC, "x")
    state, _ = advance(SPEC, state)
    before = state.model_dump()
    after = record_output(SPEC, state, "triage", '{"category": "billing"}')
    advance(SPEC, after)
    assert state.model_dump() == before
    assert after.vars["triage"] == {"category": "billing"}
    assert state.vars["triage"] is None


def test_recording_for_a_node_that_is_not_current_is_refused() -> None:
    state, _ = advance(SPEC, start(SPEC, "x"))
    with pytest.raises(InvalidTransitionError, match="not running at node 'draft'"):
        record_output(SPEC, state, "draft", "hi")
    moved = record_output(SPEC, state, "triage", '{"category": "billing"}')
    with pytest.raises(InvalidTransitionError, match="at node 'route'"):
        record_output(SPEC, moved, "triage", '{"category": "billing"}')
    with pytest.raises(InvalidTransitionError, match="not awaiting_approval at node 'triage'"):
        record_approval(SPEC, state, "triage", True)


def test_an_expression_error_fails_the_workflow_naming_the_node() -> None:
    spec = changed(check={"assignments": {"rounds": "state.rounds + last_output"}})
    driver = Driver(spec, {"agent_triage": ['{"category": "billing"}'], "agent_writer": ["draft"]})
    state = driver.run("x")
    assert state.status is WorkflowStatus.FAILED
    assert state.error is not None
    assert state.error.code == "expression_error"
    assert "node 'check'" in state.error.message
    assert "cannot apply + to number and string" in state.error.message
    assert state.node == "check"
    assert advance(spec, state)[1] == WorkflowFinished(status=WorkflowStatus.FAILED, output=None)


def test_a_value_of_the_wrong_type_for_a_state_variable_fails_the_workflow() -> None:
    spec = changed(check={"assignments": {"rounds": "'three'"}})
    state = Driver(spec, {"agent_triage": ['{"category": "billing"}'], "agent_writer": ["d"]}).run("x")
    assert state.error is not None
    assert state.error.code == "expression_error"
    assert "state variable 'rounds': expected integer, got string" in state.error.message


def test_an_integral_number_is_stored_as_an_integer() -> None:
    spec = changed(check={"assignments": {"rounds": "(state.rounds + 2) / 2", "good": "true"}})
    state = Driver(spec, {"agent_triage": ['{"category": "billing"}'], "agent_writer": ["d"]}).run("x")
    assert state.vars["rounds"] == 1
    assert isinstance(state.vars["rounds"], int)


@pytest.mark.parametrize(
    ("answer", "message"), [("category: billing", "the answer is not JSON"), ("[1, 2]", "expected object, got array")]
)
def test_an_answer_that_does_not_fit_its_state_variable_fails_the_workflow(answer: str, message: str) -> None:
    state = Driver(SPEC, {"agent_triage": [answer]}).run("x")
    assert state.status is WorkflowStatus.FAILED
    assert state.error is not None
    assert state.error.code == "output_type_error"
    assert "node 'triage'" in state.error.message
    assert message in state.error.message


def test_set_state_evaluates_every_assignment_before_assigning() -> None:
    spec = WorkflowSpec.model_validate(
        {
            "name": "swap",
            "start": "swap",
            "state": {"a": {"type": "integer", "default": 1}, "b": {"type": "integer", "default": 2}},
            "nodes": [
                {"type": "set_state", "id": "swap", "assignments": {"a": "state.b", "b": "state.a"}, "next": "done"},
                {"type": "end", "id": "done", "output": "{{ state.a }},{{ state.b }}"},
            ],
        }
    )
    state, action = advance(spec, start(spec, ""))
    assert action == WorkflowFinished(status=WorkflowStatus.COMPLETED, output="2,1")
    assert state.vars == {"a": 2, "b": 1}


def test_transform_renders_a_template_into_state() -> None:
    spec = WorkflowSpec.model_validate(
        {
            "name": "transform",
            "start": "ask",
            "state": {"ticket": {"type": "object"}},
            "nodes": [
                {"type": "agent", "id": "ask", "agent_id": "agent_a", "next": "shape"},
                {
                    "type": "transform",
                    "id": "shape",
                    "template": {"title": "{{ upper(input) }}", "labels": "{{ output.labels }}", "n": 1},
                    "output_to": "ticket",
                    "next": "done",
                },
                {"type": "end", "id": "done", "output": "{{ state.ticket }}"},
            ],
        }
    )
    state = Driver(spec, {"agent_a": ['{"labels": ["a", "b"]}']}).run("help")
    assert state.vars["ticket"] == {"title": "HELP", "labels": ["a", "b"], "n": 1}
    assert state.output == '{"title": "HELP", "labels": ["a", "b"], "n": 1}'


def test_an_end_without_output_gives_the_last_answer() -> None:
    spec = changed(done={"output": None})
    state = Driver(spec, {"agent_triage": ['{"category": "x"}'], "agent_general": ["final words"]}).run("x")
    assert state.output == "final words"


def test_the_workflow_fails_after_max_transitions_and_keeps_the_newest_trail() -> None:
    spec = WorkflowSpec.model_validate(
        {
            "name": "busy",
            "start": "outer",
            "state": {"n": {"type": "integer", "default": 0}},
            "nodes": [
                {"type": "while", "id": "outer", "condition": "true", "body": "inner", "max_iterations": 100,
                 "next": "done"},
                {"type": "while", "id": "inner", "condition": "true", "body": "count", "max_iterations": 100,
                 "next": "outer"},
                {"type": "set_state", "id": "count", "assignments": {"n": "state.n + 1"}, "next": "inner"},
                {"type": "end", "id": "done"},
            ],
        }
    )  # fmt: skip
    state, action = advance(spec, start(spec, ""))
    assert action == WorkflowFinished(status=WorkflowStatus.FAILED, output=None)
    assert state.error is not None
    assert state.error.code == "max_transitions"
    assert state.transitions == MAX_TRANSITIONS
    assert len(state.trail) == MAX_TRAIL_ENTRIES
    assert state.node == "count"  # where it stopped: the move from count back to inner was one too many
    assert "node 'count'" in state.error.message
    assert state.trail[-1].node == "inner"
    assert state.vars["n"] == 49 * 100 + 51  # 49 rounds of the outer loop (202 moves each), then 51 counts
    round_trips(state)


def test_the_work_of_one_advance_is_bounded_across_loop_iterations() -> None:
    # each iteration is cheap, but a hundred of them in one advance call share one budget
    spec = WorkflowSpec.model_validate(
        {
            "name": "grind",
            "start": "loop",
            "state": {"text": {"type": "string", "default": "x" * 90_000}, "hits": {"type": "integer", "default": 0}},
            "nodes": [
                {"type": "while", "id": "loop", "condition": "true", "body": "scan", "max_iterations": 100,
                 "next": "done"},
                {"type": "set_state", "id": "scan", "next": "loop", "assignments": {
                    "hits": "state.hits + len(lower(state.text)) / 90000"}},
                {"type": "end", "id": "done", "output": "{{ state.hits }}"},
            ],
        }
    )  # fmt: skip
    state, _ = advance(spec, start(spec, ""))
    assert state.status is WorkflowStatus.FAILED
    assert state.error is not None
    assert state.error.code == "expression_error"
    assert "node 'scan'" in state.error.message
    assert "units of work in one step" in state.error.message
    assert 1 < state.vars["hits"] < 100


def test_fail_ends_a_running_workflow_and_refuses_a_finished_one() -> None:
    state, _ = advance(SPEC, start(SPEC, "x"))
    failed = fail(state, "agent_failed", "the triage agent's run failed")
    assert failed.status is WorkflowStatus.FAILED
    assert failed.error is not None
    assert (failed.error.code, failed.error.message) == ("agent_failed", "the triage agent's run failed")
    assert state.status is WorkflowStatus.RUNNING
    with pytest.raises(InvalidTransitionError, match="already failed"):
        fail(failed, "again", "no")


def test_actions_are_told_apart_by_kind() -> None:
    actions: list[WorkflowAction] = [
        RunAgent(node="a", agent_id="agent_a", version=None, input="x"),
        AwaitApproval(node="b", message="ok?"),
        WorkflowFinished(status=WorkflowStatus.COMPLETED, output="done"),
    ]
    assert [action.model_dump()["kind"] for action in actions] == ["run_agent", "await_approval", "finished"]
