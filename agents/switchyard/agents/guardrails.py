"""Guardrails: their shapes, and checking a text against them (a run's input before its first model call, its answer
before it is given, a workflow's guardrail node).

Every check is bounded on the process that runs it (a worker every tenant shares): a regular expression is
evaluated with a time limit (``REGEX_TIMEOUT_S``; one that takes longer trips its guardrail, failing closed), and a
JSON Schema's ``pattern`` keywords are held to the same limit; schemas are bounded in size by the spec.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import jsonschema  # type: ignore[import-untyped]
import regex  # type: ignore[import-untyped]
from pydantic import ConfigDict, Field, field_validator

from switchyard.agents.shapes import (
    AGENT_ID_PATTERN,
    NAME_PATTERN,
    Strict,
    checked_schema,
)

__all__ = [
    "REGEX_TIMEOUT_S",
    "VERDICT_FORMAT",
    "AgentGuardrail",
    "GuardrailSpec",
    "Guardrails",
    "JsonSchemaGuardrail",
    "MaxLengthGuardrail",
    "RegexGuardrail",
    "Trip",
    "first_trip",
    "verdict_trip",
]

REGEX_TIMEOUT_S = 0.05
"""The most one regular expression may take on one text."""


class _Guardrail(Strict):
    name: str | None = Field(default=None, pattern=NAME_PATTERN, description="named in the error when it trips")


class RegexGuardrail(_Guardrail):
    """Trips when the text contains a match of ``pattern`` (Python ``re`` syntax; evaluation is bounded in time,
    and a pattern that takes longer trips it)."""

    type: Literal["regex"] = "regex"
    pattern: str = Field(min_length=1, max_length=1000)
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            regex.compile(value, flags=regex.VERSION0)
        except regex.error as exc:
            raise ValueError(f"pattern is not a valid regular expression: {exc}") from None
        return value


class JsonSchemaGuardrail(_Guardrail):
    """Trips unless the text is JSON valid against ``schema``."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    type: Literal["json_schema"] = "json_schema"
    json_schema: dict[str, Any] = Field(alias="schema", description="a JSON Schema")

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        return checked_schema(value, "schema")


class MaxLengthGuardrail(_Guardrail):
    """Trips when the text is longer than ``max_chars`` characters."""

    type: Literal["max_length"] = "max_length"
    max_chars: int = Field(gt=0, le=10_000_000)


class AgentGuardrail(_Guardrail):
    """Another agent of the tenant judges the text (its user message): it answers a verdict
    ``{"allowed": bool, "reason": str}`` (asked as JSON of that schema), and trips the guardrail when not allowed or
    when its answer is no such verdict. Its model calls are the run's, billed to it."""

    type: Literal["agent"] = "agent"
    agent_id: str = Field(pattern=AGENT_ID_PATTERN)
    version: int | None = Field(default=None, gt=0, description="a version of the agent (default: its latest)")


GuardrailSpec = Annotated[
    RegexGuardrail | JsonSchemaGuardrail | MaxLengthGuardrail | AgentGuardrail, Field(discriminator="type")
]


class Guardrails(Strict):
    """Checks on a run's input, before its first model call (a trip costs no compute), and on the final answer,
    before it is given (a trip replaces it). Either ends the run ``failed`` with ``guardrail_tripped``."""

    input: list[GuardrailSpec] = Field(default_factory=list, max_length=16)
    output: list[GuardrailSpec] = Field(default_factory=list, max_length=16)


@dataclass(frozen=True)
class Trip:
    """A guardrail that tripped: its name (its ``name``, else its type) and why."""

    guardrail: str
    kind: str
    reason: str

    def message(self, where: str) -> str:
        return f"{where} guardrail {self.guardrail!r} ({self.kind}) tripped: {self.reason}"


VERDICT_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "guardrail_verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"allowed": {"type": "boolean"}, "reason": {"type": "string"}},
            "required": ["allowed", "reason"],
            "additionalProperties": False,
        },
    },
}
"""The ``response_format`` an agent guardrail's judge answers in."""


def first_trip(guardrails: Sequence[GuardrailSpec], text: str) -> Trip | None:
    """The first of ``guardrails`` that ``text`` trips, or ``None`` (agent guardrails are judged by the run loop)."""
    for guardrail in guardrails:
        if isinstance(guardrail, AgentGuardrail):
            continue
        reason = _check(guardrail, text)
        if reason is not None:
            return Trip(guardrail=guardrail.name or guardrail.type, kind=guardrail.type, reason=reason)
    return None


def verdict_trip(guardrail: AgentGuardrail, answer: str) -> Trip | None:
    """How an agent guardrail's judge ruled: ``None`` when it allowed the text, else the trip (its reason, or why
    its answer is no verdict: a guardrail fails closed)."""
    try:
        verdict = json.loads(answer)
    except ValueError:
        verdict = None
    name = guardrail.name or guardrail.type
    if not isinstance(verdict, dict) or not isinstance(verdict.get("allowed"), bool):
        return Trip(guardrail=name, kind=guardrail.type, reason=f"the judge's answer is no verdict: {answer[:200]!r}")
    if verdict["allowed"]:
        return None
    return Trip(guardrail=name, kind=guardrail.type, reason=f"the judge ruled: {str(verdict.get('reason', ''))[:500]}")


def _check(guardrail: GuardrailSpec, text: str) -> str | None:
    if isinstance(guardrail, MaxLengthGuardrail):
        if len(text) > guardrail.max_chars:
            return f"the text is {len(text):,} characters long; at most {guardrail.max_chars:,} are allowed"
        return None
    if isinstance(guardrail, RegexGuardrail):
        return _regex_check(guardrail, text)
    assert isinstance(guardrail, JsonSchemaGuardrail)
    return _schema_check(guardrail.json_schema, text)  # (an AgentGuardrail never comes here)


def _search(pattern: str, text: str, *, ignore_case: bool = False) -> bool:
    """Whether ``pattern`` occurs in ``text``; raises ``TimeoutError`` past ``REGEX_TIMEOUT_S``."""
    flags = regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0)
    return regex.search(pattern, text, flags=flags, timeout=REGEX_TIMEOUT_S) is not None


def _regex_check(guardrail: RegexGuardrail, text: str) -> str | None:
    try:
        found = _search(guardrail.pattern, text, ignore_case=guardrail.ignore_case)
    except TimeoutError:
        return f"matching the pattern took longer than {REGEX_TIMEOUT_S * 1000:.0f} ms"
    return "the text matches the pattern" if found else None


def _bounded_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string"):
        return
    try:
        found = _search(pattern, instance)
    except TimeoutError:
        yield jsonschema.ValidationError(f"matching {pattern!r} took longer than {REGEX_TIMEOUT_S * 1000:.0f} ms")
        return
    if not found:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _bounded_pattern})


def _schema_check(schema: dict[str, Any], text: str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"the text is not JSON: {exc}"
    error = jsonschema.exceptions.best_match(_Validator(schema).iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the text"
    return f"{where} does not match the schema: {error.message}"
