"""The agent builder's form: every field of an agent version as form fields named by their path in the definition
(``tools.0.parameters``, ``guardrails.input.1.pattern``), read back into the definition the API takes.

The form only turns text into JSON values (numbers, lists, JSON Schemas, header lines); what is valid is the API's
schemas' and the agent service's to say, and their errors come back to the field they name: a pydantic error's
``loc`` and an ``ApiError``'s ``param`` are both paths of the definition. A draft keeps every field as typed, so a
refused form is shown again as it was sent.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from switchyard.platform.agent_registry.schemas import AgentPublic
from switchyard.platform.console.pages.agent_fields import (
    GUARDRAIL_TYPES,
    HANDOFF_FIELDS,
    LIMIT_FIELDS,
    MODEL_PARAM_FIELDS,
    OUTPUT_FIELDS,
    TOOL_TYPES,
    FormField,
    guardrail_fields,
    tool_fields,
)
from switchyard.platform.http.bodies import MAX_STORED_INTEGER

__all__ = ["Draft", "field_text", "field_value", "param_path", "place", "validation_errors"]

MAX_DIGITS = len(str(MAX_STORED_INTEGER))
"""More digits than this is past any number a column holds: refused before ``int()`` reads it."""
MAX_JSON_CHARS = 200_000  # a schema of MAX_TOOL_SCHEMA_NODES nodes is far smaller; json.loads of more is refused
_SCALARS = ("name", "model", "instructions", "metadata")


class _Problem(ValueError):
    pass


def _int(text: str) -> int:
    digits = text.removeprefix("-")
    if not (digits.isascii() and digits.isdigit() and len(digits) <= MAX_DIGITS):
        raise _Problem("a whole number such as 1024")
    return int(text)


def _float(text: str) -> float:
    try:
        value = float(text) if len(text) <= 32 and text.isascii() else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise _Problem("a number such as 0.7")
    return value


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _headers(text: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in _lines(text):
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise _Problem(f"each line is Name: value, not {line[:40]!r}")
        headers[name.strip()] = value.strip()
    return headers


def field_value(kind: str, text: str) -> Any:
    """The JSON value of a field's text; raises ``_Problem`` when it cannot be one."""
    if kind == "bool":
        return text == "on"
    if kind == "int":
        return _int(text)
    if kind == "float":
        return _float(text)
    if kind == "json":
        if len(text) > MAX_JSON_CHARS:
            raise _Problem(f"at most {MAX_JSON_CHARS:,} characters")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise _Problem(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if kind in ("lines", "methods"):
        return _lines(text.replace(",", "\n"))
    if kind == "ints":
        return [_int(line) for line in _lines(text.replace(",", "\n"))]
    if kind == "headers":
        return _headers(text)
    return text.strip()


def field_text(kind: str, value: Any) -> str:
    """A definition's value as its field shows it."""
    if value is None:
        return ""
    if kind == "bool":
        return "on" if value else ""
    if kind == "float":
        return str(int(value)) if float(value).is_integer() else str(value)
    if kind == "json":
        return json.dumps(value, indent=2)
    if kind in ("lines", "ints"):
        return "\n".join(str(v) for v in value)
    if kind == "methods":
        return ",".join(value)
    if kind == "headers":
        return "\n".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _row_values(fields: list[FormField], data: dict[str, Any]) -> dict[str, str]:
    return {f.key: field_text(f.kind, data.get(f.key)) for f in fields}


@dataclass
class Draft:
    """The agent form as typed: every value a string (a checkbox ``"on"`` or ``""``), rows in order."""

    scalars: dict[str, str] = field(default_factory=lambda: dict.fromkeys(_SCALARS, ""))
    model_params: dict[str, str] = field(default_factory=dict)
    output: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    tools: list[dict[str, str]] = field(default_factory=list)
    handoffs: list[dict[str, str]] = field(default_factory=list)
    guardrails: dict[str, list[dict[str, str]]] = field(default_factory=lambda: {"input": [], "output": []})

    @classmethod
    def of_agent(cls, agent: AgentPublic | None) -> Draft:
        """The form of ``agent`` as it stands (a new agent's: empty, with the default limits shown)."""
        from switchyard.agents import RunLimits

        if agent is None:
            return cls(limits=_row_values(LIMIT_FIELDS, RunLimits().model_dump(mode="json")))
        draft = cls(
            scalars={
                "name": agent.name,
                "model": agent.model,
                "instructions": agent.instructions,
                "metadata": field_text("headers", agent.metadata),
            },
            model_params=_row_values(MODEL_PARAM_FIELDS, agent.model_params),
            output=_row_values(OUTPUT_FIELDS, agent.output_schema or {}),
            limits=_row_values(LIMIT_FIELDS, agent.limits),
        )
        for tool in agent.tools:
            draft.tools.append({"type": tool["type"], **_row_values(tool_fields(tool["type"]), tool)})
        for handoff in agent.handoffs:
            draft.handoffs.append(_row_values(HANDOFF_FIELDS, handoff))
        for where in ("input", "output"):
            for check in agent.guardrails.get(where, []):
                draft.guardrails[where].append(
                    {"type": check["type"], **_row_values(guardrail_fields(check["type"]), check)}
                )
        return draft

    @classmethod
    def of_form(cls, form: Any) -> Draft:
        """The draft a submitted form holds (rows in the order of their indexes; unknown fields ignored)."""

        def text(name: str) -> str:
            return str(form.get(name, "")).replace("\r\n", "\n")

        def many(name: str) -> str:
            getall = getattr(form, "getall", None)
            values = getall(name, []) if getall is not None else [form.get(name, "")]
            return ",".join(str(v) for v in values if v)

        def rows(prefix: str, types: dict[str, Any] | None, fields: list[FormField] | None) -> list[dict[str, str]]:
            pattern = re.compile(rf"^{re.escape(prefix)}\.(\d{{1,3}})\.")
            indexes = sorted({int(m.group(1)) for key in form for m in [pattern.match(str(key))] if m})
            found = []
            for index in indexes:
                base = f"{prefix}.{index}."
                row: dict[str, str] = {}
                row_fields = fields or []
                if types is not None:
                    row["type"] = text(base + "type")
                    row_fields = types[row["type"]][1] if row["type"] in types else []
                for f in row_fields:
                    row[f.key] = many(base + f.key) if f.kind == "methods" else text(base + f.key)
                found.append(row)
            return found

        return cls(
            scalars={key: text(key) for key in _SCALARS},
            model_params={f.key: text(f"model_params.{f.key}") for f in MODEL_PARAM_FIELDS},
            output={f.key: text(f"output_schema.{f.key}") for f in OUTPUT_FIELDS},
            limits={f.key: text(f"limits.{f.key}") for f in LIMIT_FIELDS},
            tools=rows("tools", TOOL_TYPES, None),
            handoffs=rows("handoffs", None, HANDOFF_FIELDS),
            guardrails={where: rows(f"guardrails.{where}", GUARDRAIL_TYPES, None) for where in ("input", "output")},
        )

    def definition(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The definition the form describes, and the fields whose text is no value of their kind (by name)."""
        problems: dict[str, str] = {}

        def convert(prefix: str, fields: list[FormField], row: dict[str, str]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for f in fields:
                text = row.get(f.key, "")
                if f.kind != "bool" and not text.strip():
                    continue  # absent: the spec's default (or its "required" error)
                try:
                    out[f.key] = field_value(f.kind, text.strip() if f.kind != "json" else text)
                except _Problem as problem:
                    problems[prefix + f.key] = str(problem)
            return out

        definition: dict[str, Any] = {
            "name": self.scalars.get("name", "").strip(),
            "model": self.scalars.get("model", ""),
            "instructions": self.scalars.get("instructions", ""),
        }
        try:
            definition["metadata"] = _headers(self.scalars.get("metadata", ""))
        except _Problem as problem:
            problems["metadata"] = str(problem).replace("Name: value", "key: value")
        definition["model_params"] = convert("model_params.", MODEL_PARAM_FIELDS, self.model_params)
        if self.output.get("schema", "").strip():  # else none: the agent answers in text
            definition["output_schema"] = convert("output_schema.", OUTPUT_FIELDS, self.output)
        definition["limits"] = convert("limits.", LIMIT_FIELDS, self.limits)
        definition["tools"] = [
            {"type": row["type"], **convert(f"tools.{i}.", tool_fields(row["type"]), row)}
            for i, row in enumerate(self.tools)
        ]
        definition["handoffs"] = [convert(f"handoffs.{i}.", HANDOFF_FIELDS, row) for i, row in enumerate(self.handoffs)]
        definition["guardrails"] = {
            where: [
                {"type": row["type"], **convert(f"guardrails.{where}.{i}.", guardrail_fields(row["type"]), row)}
                for i, row in enumerate(rows)
            ]
            for where, rows in self.guardrails.items()
        }
        return definition, problems

    def field_names(self) -> set[str]:
        """Every field and row of the form, by name (where an error may be shown)."""
        names = set(_SCALARS) | {f"model_params.{f.key}" for f in MODEL_PARAM_FIELDS}
        names |= {f"limits.{f.key}" for f in LIMIT_FIELDS} | {"tools", "handoffs", "guardrails"}
        names |= {"output_schema"} | {f"output_schema.{f.key}" for f in OUTPUT_FIELDS}
        for i, row in enumerate(self.tools):
            names |= {f"tools.{i}"} | {f"tools.{i}.{f.key}" for f in tool_fields(row["type"])}
        for i in range(len(self.handoffs)):
            names |= {f"handoffs.{i}"} | {f"handoffs.{i}.{f.key}" for f in HANDOFF_FIELDS}
        for where, rows in self.guardrails.items():
            for i, row in enumerate(rows):
                base = f"guardrails.{where}.{i}"
                names |= {base} | {f"{base}.{f.key}" for f in guardrail_fields(row["type"])}
        return names

    def apply(self, op: str, form: Any) -> bool:
        """Add or remove a row (``add:tools``, ``remove:handoffs.2``...); ``True`` when ``op`` was one."""
        verb, _, target = op.partition(":")
        if verb == "add" and target == "tools":
            kind = str(form.get("new_tool_type", ""))
            if kind in TOOL_TYPES:
                self.tools.append({"type": kind, **dict.fromkeys((f.key for f in tool_fields(kind)), "")})
                if kind == "function":
                    self.tools[-1]["parameters"] = '{\n  "type": "object",\n  "properties": {}\n}'
            return True
        if verb == "add" and target == "handoffs":
            self.handoffs.append(dict.fromkeys((f.key for f in HANDOFF_FIELDS), ""))
            return True
        if verb == "add" and target in ("guardrails.input", "guardrails.output"):
            where = target.split(".")[1]
            kind = str(form.get(f"new_{where}_guardrail_type", ""))
            if kind in GUARDRAIL_TYPES:
                self.guardrails[where].append(
                    {"type": kind, **dict.fromkeys((f.key for f in guardrail_fields(kind)), "")}
                )
            return True
        if verb == "remove":
            path, _, index = target.rpartition(".")
            rows = {
                "tools": self.tools,
                "handoffs": self.handoffs,
                **{f"guardrails.{w}": r for w, r in self.guardrails.items()},
            }
            if path in rows and index.isdigit() and int(index) < len(rows[path]):
                del rows[path][int(index)]
            return True
        return False


def _path(parts: list[Any]) -> str:
    return ".".join(str(p) for p in parts)


def _loc_path(loc: tuple[Any, ...]) -> str:
    """A pydantic ``loc`` as a field name: the discriminator's tag (``tools.0.function.parameters``) dropped."""
    parts = list(loc)
    if len(parts) > 2 and parts[0] == "tools" and parts[2] in TOOL_TYPES:
        del parts[2]
    if len(parts) > 3 and parts[0] == "guardrails" and parts[3] in GUARDRAIL_TYPES:
        del parts[3]
    if parts and parts[-1] == "json_schema":
        parts[-1] = "schema"
    return _path(parts)


def param_path(param: str) -> str:
    """An ``ApiError``'s ``param`` (``tools[2].name``, ``guardrails.input[0]``) as a field name."""
    return re.sub(r"\[(\d+)\]", r".\1", param)


def place(errors: dict[str, str], names: set[str], path: str, message: str) -> None:
    """Put ``message`` on the field ``path`` names, else on its nearest row, else on the form (key ``""``)."""
    parts = path.split(".") if path else []
    while parts and _path(parts) not in names:
        parts.pop()
    key = _path(parts)
    errors[key] = f"{errors[key]}; {message}" if key in errors else message


def validation_errors(error: ValidationError, names: set[str]) -> dict[str, str]:
    errors: dict[str, str] = {}
    for item in error.errors():
        message = str(item["msg"]).removeprefix("Value error, ")
        place(errors, names, _loc_path(tuple(item["loc"])), message)
    return errors
