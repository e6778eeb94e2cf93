"""Workflow spec validation: a good graph round-trips through JSON; each broken rule is refused with a message
naming the node and the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from switchyard.agents.workflows import IfElseNode, StateVar, WhileNode, WorkflowSpec
from tests.support.workflows import support_workflow


def with_nodes(*nodes: dict[str, Any], start: str | None = None, state: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "w", "start": start or nodes[0]["id"], "state": state or {}, "nodes": list(nodes)}


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        WorkflowSpec.model_validate(data)
    return str(caught.value)


def node(data: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in data["nodes"] if n["id"] == node_id)


END = {"type": "end", "id": "done"}


def test_a_graph_with_if_else_while_and_user_approval_is_accepted_and_round_trips() -> None:
    spec = WorkflowSpec.model_validate(support_workflow())
    route = spec.node("route")
    assert isinstance(route, IfElseNode)
    assert route.else_ == "general"
    assert isinstance(spec.node("drafting"), WhileNode)
    dumped = spec.model_dump(mode="json")
    assert node(dumped, "route")["else"] == "general"
    assert "else_" not in node(dumped, "route")
    assert WorkflowSpec.model_validate_json(spec.model_dump_json()) == spec
    assert spec.state["rounds"] == StateVar(type="integer", default=0)


def test_agent_refs_list_every_agent_node() -> None:
    spec = WorkflowSpec.model_validate(support_workflow())
    assert spec.agent_refs() == [
        ("triage", "agent_triage", None),
        ("draft", "agent_writer", 2),
        ("general", "agent_general", None),
    ]


def test_a_node_lookup_of_an_unknown_id_is_a_key_error() -> None:
    spec = WorkflowSpec.model_validate(support_workflow())
    with pytest.raises(KeyError):
        spec.node("nope")


def test_duplicate_node_ids_are_refused() -> None:
    data = support_workflow()
    data["nodes"].append({"type": "end", "id": "done"})
    assert "duplicate node id 'done'" in refused(data)


def test_an_unknown_start_is_refused() -> None:
    data = support_workflow()
    data["start"] = "nowhere"
    assert "start names unknown node 'nowhere'" in refused(data)


@pytest.mark.parametrize(
    ("node_id", "field", "key"),
    [("route", "then", "then"), ("route", "else", "else"), ("drafting", "body", "body"), ("review", "rejected", None)],
)
def test_an_edge_to_an_unknown_node_is_refused(node_id: str, field: str, key: str | None) -> None:
    data = support_workflow()
    node(data, node_id)[key or field] = "nowhere"
    assert f"node {node_id!r}: {field} names unknown node 'nowhere'" in refused(data)


def test_writing_an_undeclared_state_variable_is_refused() -> None:
    data = support_workflow()
    node(data, "triage")["output_to"] = "nope"
    assert "node 'triage': output_to names undeclared state variable 'nope'" in refused(data)
    data = support_workflow()
    node(data, "check")["assignments"]["ghost"] = "1"
    assert "node 'check': assignments.ghost names undeclared state variable 'ghost'" in refused(data)


def test_an_unparsable_expression_is_refused() -> None:
    data = support_workflow()
    node(data, "route")["condition"] = "output.category = 'billing'"
    assert "node 'route': condition does not parse: unexpected '=': use == to compare" in refused(data)
    data = support_workflow()
    node(data, "check")["assignments"]["rounds"] = "state.rounds ** 2"
    assert "node 'check': assignments.rounds does not parse" in refused(data)


def test_an_unparsable_template_is_refused() -> None:
    data = support_workflow()
    node(data, "review")["message"] = "Send {{ state.draft + }}?"
    assert "node 'review': message is not a valid template" in refused(data)
    data = support_workflow()
    node(data, "done")["output"] = "{{ state.draft"
    assert "node 'done': output is not a valid template: unclosed {{" in refused(data)


def test_an_unreachable_node_is_refused() -> None:
    data = support_workflow()
    data["nodes"].append({"type": "end", "id": "orphan"})
    assert "node 'orphan' is not reachable from start 'triage'" in refused(data)


def test_a_node_from_which_no_end_is_reachable_is_refused() -> None:
    data = with_nodes(
        {"type": "if_else", "id": "s", "condition": "true", "then": "done", "else": "loop"},
        {"type": "while", "id": "loop", "condition": "true", "body": "x", "max_iterations": 5, "next": "x"},
        {"type": "agent", "id": "x", "agent_id": "agent_a", "next": "loop"},
        END,
    )
    assert "node 'loop': no end node is reachable from it" in refused(data)


def test_a_cycle_without_a_while_node_is_refused() -> None:
    data = with_nodes(
        {"type": "agent", "id": "a", "agent_id": "agent_a", "next": "b"},
        {"type": "if_else", "id": "b", "condition": "'again' in last_output", "then": "a", "else": "done"},
        END,
    )
    assert "the loop a -> b -> a does not pass through a while node's body" in refused(data)


def test_a_while_next_edge_leading_back_into_its_body_is_refused() -> None:
    # w's count resets when it exits through next; coming back to w from there would loop for ever
    data = with_nodes(
        {"type": "while", "id": "w", "condition": "true", "body": "a", "max_iterations": 3, "next": "a"},
        {"type": "if_else", "id": "a", "condition": "state.n > 1", "then": "w", "else": "done"},
        END,
        state={"n": {"type": "number"}},
    )
    assert "does not pass through a while node's body" in refused(data)


def test_nested_loops_and_a_next_edge_bounded_by_another_loop_are_accepted() -> None:
    spec = WorkflowSpec.model_validate(
        with_nodes(
            {"type": "while", "id": "outer", "condition": "true", "body": "inner", "max_iterations": 2, "next": "done"},
            {"type": "while", "id": "inner", "condition": "true", "body": "work", "max_iterations": 3,
             "next": "outer"},
            {"type": "agent", "id": "work", "agent_id": "agent_a", "next": "inner"},
            END,
        )
    )  # fmt: skip
    assert [n.id for n in spec.nodes] == ["outer", "inner", "work", "done"]


def test_a_while_body_that_does_not_lead_back_is_refused() -> None:
    data = with_nodes(
        {"type": "while", "id": "w", "condition": "true", "body": "a", "max_iterations": 3, "next": "done"},
        {"type": "agent", "id": "a", "agent_id": "agent_a", "next": "done"},
        END,
    )
    assert "node 'w': body 'a' does not lead back to the while node" in refused(data)


@pytest.mark.parametrize("iterations", [0, 101])
def test_max_iterations_is_between_1_and_100(iterations: int) -> None:
    data = support_workflow()
    node(data, "drafting")["max_iterations"] = iterations
    assert "max_iterations" in refused(data)


def test_values_keep_their_json_types() -> None:
    data = support_workflow()
    node(data, "drafting")["max_iterations"] = "3"
    assert "Input should be a valid integer" in refused(data)


def test_unknown_fields_and_node_types_are_refused() -> None:
    data = support_workflow()
    node(data, "done")["colour"] = "red"
    assert "Extra inputs are not permitted" in refused(data)
    data = support_workflow()
    node(data, "done")["type"] = "goto"
    assert "does not match any of the expected tags" in refused(data)


def test_state_variables_are_named_and_typed() -> None:
    data = support_workflow()
    data["state"]["1bad"] = {"type": "string"}
    assert "state variable name '1bad' must be a letter or _" in refused(data)
    data = support_workflow()
    data["state"]["rounds"] = {"type": "integer", "default": "zero"}
    assert "expected integer, got string" in refused(data)
    data = support_workflow()
    data["state"]["good"] = {"type": "boolean", "default": 0}
    assert "expected boolean, got number" in refused(data)
    data = support_workflow()
    data["state"]["x"] = {"type": "date"}
    assert "'string', 'number', 'integer', 'boolean', 'object' or 'array'" in refused(data)


def test_state_variable_defaults_are_coerced_to_their_type() -> None:
    assert StateVar(type="integer", default=2.0).default == 2
    assert StateVar(type="number", default=None).default is None
    with pytest.raises(ValidationError, match="expected integer, got number"):
        StateVar(type="integer", default=2.5)


def test_the_node_count_is_bounded() -> None:
    data = with_nodes(*[{"type": "end", "id": f"e{i}"} for i in range(201)])
    assert "at most 200 items" in refused(data)


def test_agent_ids_and_node_ids_follow_their_patterns() -> None:
    data = support_workflow()
    node(data, "triage")["agent_id"] = "triage"
    assert "agent_id" in refused(data)
    data = support_workflow()
    data["nodes"].append({"type": "end", "id": "has space"})
    assert "String should match pattern" in refused(data)


def test_the_spec_is_immutable() -> None:
    spec = WorkflowSpec.model_validate(support_workflow())
    with pytest.raises(ValidationError):
        spec.start = "done"  # type: ignore[misc]
    assert copy.deepcopy(spec) == spec


def test_a_spec_checked_again_stays_valid() -> None:
    """A spec handed where a spec is expected (an agent spec's ``workflow``) is checked again, and still passes."""
    from switchyard.agents import AgentSpec

    spec = WorkflowSpec.model_validate(support_workflow())
    assert AgentSpec(name="a", model="m", workflow=spec).workflow == spec
