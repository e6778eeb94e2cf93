"""The workflow editor's form: the workflow's fields, its state variables and one section per node, named by their
place in the definition (``nodes.2.condition``, ``state.0.type``), read back into the definition ``/v1/workflows``
takes. As in the agent builder (``agent_form``), the form only turns text into JSON values; the spec and the
workflow service say what is valid, and their errors come back to the node (and field) they concern: a pydantic
error's ``loc``, a service error's ``param`` (``nodes.<node id>.agent_id``), or the graph check's message, which
names its node (``node 'review': then names unknown node 'x'``). A refused form is shown again as it was sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from switchyard.platform.console.pages.agent_form import field_text, field_value, place
from switchyard.platform.console.pages.workflow_fields import NODE_TYPES, edge_keys, node_fields
from switchyard.platform.workflows.schemas import WorkflowPublic, WorkflowVersionPublic

__all__ = ["WorkflowDraft", "starting_graph", "workflow_errors"]

_SCALARS = ("name", "description", "start", "metadata", "tools")
_ROW_INDEX = r"(\d{1,3})"
_NODE_NAMED = re.compile(r"node '([A-Za-z0-9_-]{1,64})'(?::? (\w+))?")
_LOOP = re.compile(r"the loop ([A-Za-z0-9_-]{1,64}) ->")


def starting_graph(name: str, agent_id: str) -> dict[str, Any]:
    """A new workflow's graph: its start asks ``agent_id``, then it ends with the agent's answer."""
    return {
        "name": name,
        "start": "ask",
        "nodes": [
            {"type": "agent", "id": "ask", "name": "Ask the agent", "agent_id": agent_id, "next": "done"},
            {"type": "end", "id": "done", "name": "Answer"},
        ],
    }


@dataclass
class WorkflowDraft:
    """The editor as typed: every value a string, state variables and nodes in order (a node's ``type`` fixed)."""

    scalars: dict[str, str] = field(default_factory=lambda: dict.fromkeys(_SCALARS, ""))
    state: list[dict[str, str]] = field(default_factory=list)
    nodes: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def of_workflow(cls, workflow: WorkflowPublic | WorkflowVersionPublic) -> WorkflowDraft:
        """The form of ``workflow``'s latest version (or of one of its versions)."""
        draft = cls(
            scalars={
                "name": workflow.name,
                "description": workflow.description,
                "start": workflow.start,
                "metadata": field_text("headers", workflow.metadata),
                "tools": field_text("json", workflow.tools) if workflow.tools else "",
            }
        )
        for var_name, var in workflow.state.items():
            default = var.get("default")
            draft.state.append(
                {
                    "name": var_name,
                    "type": str(var.get("type")),
                    "default": "" if default is None else field_text("json", default),
                }
            )
        for node in workflow.nodes:
            kind = str(node.get("type"))
            row = {"type": kind, "id": str(node.get("id", "")), "name": field_text("text", node.get("name"))}
            row |= {f.key: field_text(f.kind, node.get(f.key)) for f in node_fields(kind)}
            row |= {key: str(node.get(key) or "") for key in edge_keys(kind)}
            draft.nodes.append(row)
        return draft

    @classmethod
    def of_form(cls, form: Any) -> WorkflowDraft:
        """The draft a submitted form holds (rows in the order of their indexes; unknown fields ignored)."""

        def text(name: str) -> str:
            return str(form.get(name, "")).replace("\r\n", "\n")

        def indexes(prefix: str) -> list[int]:
            pattern = re.compile(rf"^{prefix}\.{_ROW_INDEX}\.")
            return sorted({int(m.group(1)) for key in form for m in [pattern.match(str(key))] if m})

        draft = cls(scalars={key: text(key) for key in _SCALARS})
        for i in indexes("state"):
            draft.state.append({key: text(f"state.{i}.{key}") for key in ("name", "type", "default")})
        for i in indexes("nodes"):
            kind = text(f"nodes.{i}.type")
            keys = ["id", "name", *(f.key for f in node_fields(kind)), *edge_keys(kind)]
            draft.nodes.append({"type": kind} | {key: text(f"nodes.{i}.{key}") for key in keys})
        return draft

    def node_ids(self) -> list[str]:
        """The nodes' ids as typed (what connections and the start choose from)."""
        return [node["id"].strip() for node in self.nodes if node["id"].strip()]

    def definition(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The workflow the form describes, and the fields whose text is no value of their kind (by name)."""
        problems: dict[str, str] = {}

        def convert(name: str, kind: str, text: str) -> Any:
            try:
                return field_value(kind, text if kind == "json" else text.strip())
            except ValueError as problem:
                problems[name] = str(problem)
                return None

        definition: dict[str, Any] = {
            "name": self.scalars["name"].strip(),
            "description": self.scalars["description"].strip(),
            "start": self.scalars["start"].strip(),
            "metadata": convert("metadata", "headers", self.scalars["metadata"]),
            "tools": convert("tools", "json", self.scalars["tools"]) if self.scalars["tools"].strip() else [],
            "state": {},
            "nodes": [],
        }
        for i, var in enumerate(self.state):
            default = convert(f"state.{i}.default", "json", var["default"]) if var["default"].strip() else None
            definition["state"][var["name"].strip()] = {"type": var["type"], "default": default}
        for i, row in enumerate(self.nodes):
            node: dict[str, Any] = {"type": row["type"], "id": row["id"].strip()}
            if row["name"].strip():
                node["name"] = row["name"].strip()
            for f in node_fields(row["type"]):
                if row.get(f.key, "").strip():  # absent: the spec's default (or its "required" error)
                    node[f.key] = convert(f"nodes.{i}.{f.key}", f.kind, row[f.key])
            for key in edge_keys(row["type"]):
                if row.get(key, "").strip():
                    node[key] = row[key].strip()
            definition["nodes"].append(node)
        return definition, problems

    def field_names(self) -> set[str]:
        """Every field, node and variable of the form, by name (where an error may be shown)."""
        names = set(_SCALARS) | {"state", "nodes"}
        for i in range(len(self.state)):
            names |= {f"state.{i}"} | {f"state.{i}.{key}" for key in ("name", "type", "default")}
        for i, row in enumerate(self.nodes):
            keys = ["id", "name", *(f.key for f in node_fields(row["type"])), *edge_keys(row["type"])]
            names |= {f"nodes.{i}"} | {f"nodes.{i}.{key}" for key in keys}
        return names

    def apply(self, op: str, form: Any) -> str | None:
        """Add or remove a node or variable (``add:nodes``, ``remove:state.1``...); the field to focus after it
        (``None`` when ``op`` is none of these)."""
        verb, _, target = op.partition(":")
        if verb == "add" and target == "nodes":
            kind = str(form.get("new_node_type", ""))
            if kind not in NODE_TYPES:
                return "add-nodes"
            taken, n = set(self.node_ids()), 1
            while f"{kind}_{n}" in taken:
                n += 1
            keys = [*(f.key for f in node_fields(kind)), *edge_keys(kind)]
            self.nodes.append({"type": kind, "id": f"{kind}_{n}", "name": ""} | dict.fromkeys(keys, ""))
            first = node_fields(kind)[0].key if node_fields(kind) else "name"
            return f"nodes.{len(self.nodes) - 1}.{first}"
        if verb == "add" and target == "state":
            self.state.append({"name": "", "type": "string", "default": ""})
            return f"state.{len(self.state) - 1}.name"
        if verb == "remove":
            rows = {"nodes": self.nodes, "state": self.state}
            path, _, index = target.partition(".")
            if path in rows and index.isdigit() and int(index) < len(rows[path]):
                del rows[path][int(index)]
            return f"add-{path}" if path in rows else "add-nodes"
        return None


def _node_field(draft: WorkflowDraft, node_id: str, key: str | None) -> str:
    """The name of node ``node_id``'s field ``key`` (its section when it has no such field; ``nodes`` when no node
    has that id). A duplicated id names the later node, the one the check found."""
    found = [i for i, row in enumerate(draft.nodes) if row["id"].strip() == node_id]
    if not found:
        return "nodes"
    i = found[-1]
    names = draft.field_names()
    return f"nodes.{i}.{key}" if key and f"nodes.{i}.{key}" in names else f"nodes.{i}"


def _message_path(draft: WorkflowDraft, message: str) -> str:
    """Where a check's message belongs: the node (and field) it names, the start, or the form."""
    if message.startswith("start names"):
        return "start"
    if message.startswith("duplicate node id"):
        named = _NODE_NAMED.search(message.replace("duplicate node id", "node"))
        return _node_field(draft, named.group(1), "id") if named else "nodes"
    loop = _LOOP.search(message)
    if loop:
        return _node_field(draft, loop.group(1), None)
    named = _NODE_NAMED.search(message)
    return _node_field(draft, named.group(1), named.group(2)) if named else ""


def _loc_path(draft: WorkflowDraft, loc: tuple[Any, ...]) -> str:
    """A pydantic ``loc`` as a field name: a node's type tag dropped, a variable's name as its row."""
    parts = [str(p) for p in loc]
    if len(parts) > 2 and parts[0] == "nodes" and parts[2] in NODE_TYPES:
        del parts[2]
    if len(parts) > 1 and parts[0] == "state":
        rows = [i for i, var in enumerate(draft.state) if var["name"].strip() == parts[1]]
        parts[1:2] = [str(rows[-1])] if rows else []
    if parts[:1] == ["tools"]:
        return "tools"  # one JSON field holds them all
    return ".".join(parts)


def workflow_errors(
    draft: WorkflowDraft, error: ValidationError | None, param: str = "", message: str = ""
) -> dict[str, str]:
    """The errors of a refused save, each on the field or node it concerns: a ``ValidationError`` of the spec, or
    the service's ``param`` and ``message``."""
    names = draft.field_names()
    errors: dict[str, str] = {}
    items = (
        [(tuple(item["loc"]), str(item["msg"]).removeprefix("Value error, ")) for item in error.errors()]
        if error is not None
        else [((), message)]
    )
    for loc, text in items:
        path = _loc_path(draft, loc)
        if not path and param.startswith("nodes."):  # nodes.<node id>.agent_id
            node_id, _, key = param.removeprefix("nodes.").partition(".")
            path = _node_field(draft, node_id, key or None)
        elif not path:
            path = re.sub(r"\[(\d+)\]", r".\1", param) or _message_path(draft, text.removeprefix("invalid workflow: "))
        place(errors, names, path, text)
    return errors
