"""Checking a text against guardrails: the run's input before its first model call, its answer before it is given.

Every check is bounded on the process that runs it (a worker every tenant shares): a regular expression is
evaluated with a time limit (``REGEX_TIMEOUT_S``; one that takes longer trips its guardrail, failing closed), and a
JSON Schema's ``pattern`` keywords are held to the same limit; schemas are bounded in size by the spec.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import regex  # type: ignore[import-untyped]

from switchyard.agents.spec import (
    AgentGuardrail,
    GuardrailSpec,
    JsonSchemaGuardrail,
    MaxLengthGuardrail,
    RegexGuardrail,
)

__all__ = ["REGEX_TIMEOUT_S", "VERDICT_FORMAT", "Trip", "first_trip", "verdict_trip"]

REGEX_TIMEOUT_S = 0.05
"""The most one regular expression may take on one text."""


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
