"""The workflow specification: a graph of agent calls, decisions, bounded loops and approvals over typed state.

A spec is checked whole when it is saved (:class:`WorkflowSpec`'s validator): every edge names a node, every
expression and template parses, every node is reachable from ``start`` and can reach an ``end``, and every cycle of
the graph passes through a ``while`` node's ``body`` edge, whose ``max_iterations`` bounds it (a loop re-entered
through its ``next`` edge would reset that count, so such a cycle is refused unless another loop bounds it).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from switchyard.agents.guardrails import AgentGuardrail, GuardrailSpec
from switchyard.agents.shapes import AGENT_ID_PATTERN, MAX_TOOLS_SCHEMA_NODES, NAME_PATTERN, Strict
from switchyard.agents.sizes import checked_metadata, schema_nodes
from switchyard.agents.workflows.expressions import ExpressionError, parse
from switchyard.agents.workflows.templates import parse_template

__all__ = [
    "AgentNode",
    "EndNode",
    "FileSearchNode",
    "FunctionNode",
    "GuardrailNode",
    "IfElseNode",
    "McpNode",
    "SetStateNode",
    "StateVar",
    "TransformNode",
    "UserApprovalNode",
    "WhileNode",
    "WorkflowNode",
    "WorkflowSpec",
]

_NODE_ID = r"^[A-Za-z0-9_-]{1,64}$"
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_DEFAULT_NODES = 1_000  # JSON values in one state variable's default


class StateVar(Strict):
    """A workflow variable (``state.<name>`` in expressions); ``null`` is a value of every type."""

    type: Literal["string", "number", "integer", "boolean", "object", "array"]
    default: Any = Field(default=None, description="the value when the workflow starts (null: none)")

    @field_validator("default")
    @classmethod
    def _default_fits(cls, value: Any, info: ValidationInfo) -> Any:
        if schema_nodes(value, past=MAX_DEFAULT_NODES) > MAX_DEFAULT_NODES:
            raise ValueError(f"default has more than {MAX_DEFAULT_NODES:,} JSON values")
        var_type = info.data.get("type")
        return value if var_type is None else _coerce(var_type, value)

    def coerce(self, value: Any) -> Any:
        """``value`` as a value of this variable (an integral number for an ``integer`` becomes an int);
        raises ``ValueError`` naming both types when it is of another type."""
        return _coerce(self.type, value)


def _coerce(var_type: str, value: Any) -> Any:
    fits = {
        "string": isinstance(value, str),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "integer": (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, float) and value.is_integer()),
        "boolean": isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }[var_type]
    if value is not None and not fits:
        raise ValueError(f"expected {var_type}, got {_json_type(value)}")
    return int(value) if var_type == "integer" and value is not None else value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    names = {str: "string", int: "number", float: "number", dict: "object", list: "array"}
    return names.get(type(value), type(value).__name__)


class _Node(Strict):
    id: str = Field(pattern=_NODE_ID, description="unique within the workflow")
    name: str | None = Field(default=None, max_length=256, description="shown in the console")

    def edges(self) -> list[tuple[str, str]]:
        """The nodes this one can go to, as (field, node id)."""
        return []

    def expressions(self) -> list[tuple[str, str]]:
        """Its expressions, as (field, text)."""
        return []

    def templates(self) -> list[tuple[str, Any]]:
        """Its templates, as (field, template)."""
        return []

    def writes(self) -> list[tuple[str, str]]:
        """The state variables it assigns, as (field, variable)."""
        return []


class AgentNode(_Node):
    """Runs an agent on a rendered input; its answer becomes ``last_output`` (and ``output_to``)."""

    type: Literal["agent"] = "agent"
    agent_id: str = Field(pattern=AGENT_ID_PATTERN)
    version: int | None = Field(default=None, gt=0, description="a version of the agent (default: its latest)")
    input: str | None = Field(
        default=None,
        max_length=100_000,
        description="a template of the agent's input (default: the last agent's answer, else the workflow input)",
    )
    output_to: str | None = Field(
        default=None, description="a state variable for the answer (parsed as JSON unless the variable is a string)"
    )
    next: str

    def edges(self) -> list[tuple[str, str]]:
        return [("next", self.next)]

    def templates(self) -> list[tuple[str, Any]]:
        return [] if self.input is None else [("input", self.input)]

    def writes(self) -> list[tuple[str, str]]:
        return [] if self.output_to is None else [("output_to", self.output_to)]


class IfElseNode(_Node):
    """Goes to ``then`` when ``condition`` is truthy, else to ``else``."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    type: Literal["if_else"] = "if_else"
    condition: str
    then: str
    else_: str = Field(alias="else")

    def edges(self) -> list[tuple[str, str]]:
        return [("then", self.then), ("else", self.else_)]

    def expressions(self) -> list[tuple[str, str]]:
        return [("condition", self.condition)]


class WhileNode(_Node):
    """Runs the loop starting at ``body`` while ``condition`` is truthy, at most ``max_iterations`` times in a row;
    then goes to ``next`` (and the count starts again the next time the loop is entered)."""

    type: Literal["while"] = "while"
    condition: str
    body: str = Field(description="the first node of the loop body, which leads back to this node")
    max_iterations: int = Field(ge=1, le=100)
    next: str

    def edges(self) -> list[tuple[str, str]]:
        return [("body", self.body), ("next", self.next)]

    def expressions(self) -> list[tuple[str, str]]:
        return [("condition", self.condition)]


class UserApprovalNode(_Node):
    """Waits for a person to approve or reject the rendered ``message``."""

    type: Literal["user_approval"] = "user_approval"
    message: str = Field(max_length=4096, description="a template")
    approved: str
    rejected: str

    def edges(self) -> list[tuple[str, str]]:
        return [("approved", self.approved), ("rejected", self.rejected)]

    def templates(self) -> list[tuple[str, Any]]:
        return [("message", self.message)]


class TransformNode(_Node):
    """Renders a JSON template into a state variable."""

    type: Literal["transform"] = "transform"
    template: Any = Field(description="a JSON template")
    output_to: str
    next: str

    def edges(self) -> list[tuple[str, str]]:
        return [("next", self.next)]

    def templates(self) -> list[tuple[str, Any]]:
        return [("template", self.template)]

    def writes(self) -> list[tuple[str, str]]:
        return [("output_to", self.output_to)]


class SetStateNode(_Node):
    """Assigns state variables from expressions, all evaluated before any is assigned."""

    type: Literal["set_state"] = "set_state"
    assignments: dict[str, str] = Field(min_length=1, max_length=32, description="variable -> expression")
    next: str

    def edges(self) -> list[tuple[str, str]]:
        return [("next", self.next)]

    def expressions(self) -> list[tuple[str, str]]:
        return [(f"assignments.{var}", text) for var, text in self.assignments.items()]

    def writes(self) -> list[tuple[str, str]]:
        return [(f"assignments.{var}", var) for var in self.assignments]


class GuardrailNode(_Node):
    """Checks the rendered ``input`` (default: the last answer, else the workflow input) against ``guardrails``: goes
    to ``passed``, or to ``tripped`` at the first that trips (why, in ``reason_to`` when given). The checks are a
    run's (``regex``, ``json_schema``, ``max_length``); for an agent judging, use an ``agent`` node and an
    ``if_else`` on its answer."""

    type: Literal["guardrail"] = "guardrail"
    input: str | None = Field(default=None, max_length=100_000, description="a template of the text checked")
    guardrails: list[GuardrailSpec] = Field(min_length=1, max_length=16)
    passed: str
    tripped: str
    reason_to: str | None = Field(default=None, description="a string state variable for why a guardrail tripped")

    @field_validator("guardrails")
    @classmethod
    def _no_judges(cls, value: list[GuardrailSpec]) -> list[GuardrailSpec]:
        if any(isinstance(g, AgentGuardrail) for g in value):
            raise ValueError(
                "a guardrail node checks regex, json_schema and max_length guardrails; for an agent judging, use an "
                "agent node and an if_else on its answer"
            )
        return value

    def edges(self) -> list[tuple[str, str]]:
        return [("passed", self.passed), ("tripped", self.tripped)]

    def templates(self) -> list[tuple[str, Any]]:
        return [] if self.input is None else [("input", self.input)]

    def writes(self) -> list[tuple[str, str]]:
        return [] if self.reason_to is None else [("reason_to", self.reason_to)]


class _ToolCallNode(_Node):
    arguments: Any = Field(
        default_factory=dict, description="a JSON template of the call's arguments (it must render an object)"
    )
    output_to: str | None = Field(
        default=None, description="a state variable for the output (parsed as JSON unless the variable is a string)"
    )
    next: str

    def edges(self) -> list[tuple[str, str]]:
        return [("next", self.next)]

    def templates(self) -> list[tuple[str, Any]]:
        return [("arguments", self.arguments)]

    def writes(self) -> list[tuple[str, str]]:
        return [] if self.output_to is None else [("output_to", self.output_to)]


class FunctionNode(_ToolCallNode):
    """Calls one of the workflow's tools by name: a ``function`` tool (the client runs it: the run waits in
    ``requires_action`` for its output) or a built-in one (run on the worker); its output becomes ``last_output``."""

    type: Literal["function"] = "function"
    tool: str = Field(pattern=NAME_PATTERN, description="the name of one of the workflow's tools (not an MCP server)")


class FileSearchNode(_Node):
    """Searches the workflow's vector stores (its ``file_search`` tool) for the rendered ``query``; the hits
    (``{"results": [{file_id, filename, score, text, attributes}]}``) become ``last_output``."""

    type: Literal["file_search"] = "file_search"
    query: str = Field(default="{{ input }}", max_length=4096, description="a template of the query")
    output_to: str | None = Field(default=None, description="a state variable for the hits (an object, or a string)")
    next: str

    def edges(self) -> list[tuple[str, str]]:
        return [("next", self.next)]

    def templates(self) -> list[tuple[str, Any]]:
        return [("query", self.query)]

    def writes(self) -> list[tuple[str, str]]:
        return [] if self.output_to is None else [("output_to", self.output_to)]


class McpNode(_ToolCallNode):
    """Calls ``tool`` on the workflow's MCP server ``server_label``; its output becomes ``last_output``."""

    type: Literal["mcp"] = "mcp"
    server_label: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$", description="one of the workflow's MCP servers")
    tool: str = Field(min_length=1, max_length=128, description="the tool's name on the server")


class EndNode(_Node):
    """Completes the workflow with the rendered ``output`` (default: the last agent's answer)."""

    type: Literal["end"] = "end"
    output: str | None = Field(default=None, max_length=100_000, description="a template of the final answer")

    def templates(self) -> list[tuple[str, Any]]:
        return [] if self.output is None else [("output", self.output)]


WorkflowNode = Annotated[
    AgentNode
    | IfElseNode
    | WhileNode
    | UserApprovalNode
    | TransformNode
    | SetStateNode
    | GuardrailNode
    | FunctionNode
    | McpNode
    | FileSearchNode
    | EndNode,
    Field(discriminator="type"),
]


class WorkflowSpec(Strict):
    """A workflow version: its state variables and its graph of nodes, entered at ``start``."""

    name: str = Field(min_length=1, max_length=256, examples=["refund-desk"])
    description: str = Field(default="", max_length=4096)
    start: str = Field(description="the id of the first node", examples=["ask"])
    state: dict[str, StateVar] = Field(default_factory=dict, max_length=64)
    nodes: list[WorkflowNode] = Field(
        min_length=1,
        max_length=200,
        examples=[
            [
                {"type": "agent", "id": "ask", "agent_id": "agent_01jd8v0000000000000000000", "next": "done"},
                {"type": "end", "id": "done"},
            ]
        ],
    )
    metadata: dict[str, str] = Field(default_factory=dict, max_length=16)

    _by_id: dict[str, WorkflowNode] = PrivateAttr(default_factory=dict)

    def node(self, node_id: str) -> WorkflowNode:
        """The node with id ``node_id`` (``KeyError`` when there is none)."""
        return self._by_id[node_id]

    def tool_calls(self) -> list[FunctionNode | McpNode | FileSearchNode]:
        """The nodes that call one of the workflow's tools."""
        return [n for n in self.nodes if isinstance(n, FunctionNode | McpNode | FileSearchNode)]

    def agent_refs(self) -> list[tuple[str, str, int | None]]:
        """The agents the workflow runs, as (node id, agent id, version or ``None`` for the latest)."""
        return [(n.id, n.agent_id, n.version) for n in self.nodes if isinstance(n, AgentNode)]

    @model_validator(mode="before")
    @classmethod
    def _bounded_schemas(cls, data: Any) -> Any:
        # before the guardrails' schemas are each checked against the metaschema (CPU on a shared event loop)
        nodes = data.get("nodes") if isinstance(data, dict) else None
        schemas = [
            check.get("schema")
            for node in (nodes if isinstance(nodes, list) else [])
            if isinstance(node, dict) and isinstance(node.get("guardrails"), list)
            for check in node["guardrails"]
            if isinstance(check, dict)
        ]
        if schema_nodes(schemas, past=MAX_TOOLS_SCHEMA_NODES + 1) > MAX_TOOLS_SCHEMA_NODES + 1:
            raise ValueError(f"the guardrail nodes' schemas have more than {MAX_TOOLS_SCHEMA_NODES:,} nodes together")
        return data

    @field_validator("state")
    @classmethod
    def _var_names(cls, value: dict[str, StateVar]) -> dict[str, StateVar]:
        for name in value:
            if not _VAR_NAME.match(name):
                raise ValueError(
                    f"state variable name {name[:80]!r} must be a letter or _, then up to 63 letters, digits or _"
                )
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_metadata(value)

    @model_validator(mode="after")
    def _valid_graph(self) -> WorkflowSpec:
        self._by_id = {}  # (a spec given where a spec is expected is checked again: start afresh)
        for node in self.nodes:
            if node.id in self._by_id:
                raise ValueError(f"duplicate node id {node.id!r}")
            self._by_id[node.id] = node
        if self.start not in self._by_id:
            raise ValueError(f"start names unknown node {self.start!r}")
        for node in self.nodes:
            self._check_node(node)
        successors = {node.id: [target for _, target in node.edges()] for node in self.nodes}
        reachable = _reachable([self.start], successors)
        for node in self.nodes:
            if node.id not in reachable:
                raise ValueError(f"node {node.id!r} is not reachable from start {self.start!r}")
        predecessors: dict[str, list[str]] = {node_id: [] for node_id in successors}
        for node_id, targets in successors.items():
            for target in targets:
                predecessors[target].append(node_id)
        ending = _reachable([n.id for n in self.nodes if isinstance(n, EndNode)], predecessors)
        for node in self.nodes:
            if node.id not in ending:
                raise ValueError(f"node {node.id!r}: no end node is reachable from it")
            if isinstance(node, WhileNode) and node.id not in _reachable([node.body], successors):
                raise ValueError(f"node {node.id!r}: body {node.body!r} does not lead back to the while node")
        cycle = _unbounded_cycle(self.nodes)
        if cycle is not None:
            raise ValueError(
                f"the loop {' -> '.join(cycle)} does not pass through a while node's body, so nothing bounds it "
                "(every loop must be a while node's body; re-entering a while node through its next edge resets "
                "its count)"
            )
        return self

    def _check_node(self, node: WorkflowNode) -> None:
        for field, target in node.edges():
            if target not in self._by_id:
                raise ValueError(f"node {node.id!r}: {field} names unknown node {target!r}")
        for field, var in node.writes():
            if var not in self.state:
                raise ValueError(f"node {node.id!r}: {field} names undeclared state variable {var!r}")
        if isinstance(node, GuardrailNode) and node.reason_to and self.state[node.reason_to].type != "string":
            raise ValueError(f"node {node.id!r}: reason_to names {node.reason_to!r}, which is not a string variable")
        for field, text in node.expressions():
            try:
                parse(text)
            except ExpressionError as exc:
                raise ValueError(f"node {node.id!r}: {field} does not parse: {exc}") from None
        for field, template in node.templates():
            try:
                parse_template(template)
            except ExpressionError as exc:
                raise ValueError(f"node {node.id!r}: {field} is not a valid template: {exc}") from None


def _reachable(roots: list[str], edges: dict[str, list[str]]) -> set[str]:
    seen, pending = set(roots), list(roots)
    while pending:
        for target in edges[pending.pop()]:
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


def _unbounded_cycle(nodes: list[WorkflowNode]) -> list[str] | None:
    """A cycle of the graph without the while nodes' body edges, as node ids (first repeated last), or ``None``.

    Without those edges the graph must be acyclic: then every cycle takes some while node's body edge, whose
    count only resets when that loop exits, and the loops' bounds bound every walk (Kahn's algorithm)."""
    successors = {
        node.id: [target for field, target in node.edges() if not (isinstance(node, WhileNode) and field == "body")]
        for node in nodes
    }
    indegree = dict.fromkeys(successors, 0)
    for targets in successors.values():
        for target in targets:
            indegree[target] += 1
    free = [node_id for node_id, count in indegree.items() if count == 0]
    while free:
        for target in successors[free.pop()]:
            indegree[target] -= 1
            if indegree[target] == 0:
                free.append(target)
    left = {node_id for node_id, count in indegree.items() if count > 0}
    if not left:
        return None
    # every node left has a predecessor left: walk predecessors until one repeats
    predecessor = {target: source for source in left for target in successors[source] if target in left}
    walk, at = [], next(iter(sorted(left)))
    while at not in walk:
        walk.append(at)
        at = predecessor[at]
    cycle = walk[walk.index(at) :]
    cycle.reverse()
    order = {node.id: index for index, node in enumerate(nodes)}
    first = min(range(len(cycle)), key=lambda i: order[cycle[i]])  # told from the node listed first
    cycle = cycle[first:] + cycle[:first]
    return [*cycle, cycle[0]]
