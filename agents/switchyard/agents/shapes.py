"""What the shapes a tenant defines share: strict models, name and id patterns, JSON Schemas checked once."""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict

from switchyard.agents.sizes import schema_nodes

__all__ = [
    "AGENT_ID_PATTERN",
    "MAX_TOOLS_SCHEMA_NODES",
    "MAX_TOOL_SCHEMA_NODES",
    "NAME_PATTERN",
    "Strict",
    "checked_schema",
    "schema_error",
]

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
AGENT_ID_PATTERN = r"^agent_[A-Za-z0-9]{1,64}$"
# Checking a schema against JSON Schema's metaschema costs ~0.06 ms of CPU a node, on the event loop that serves
# every tenant (a 107 KB allOf bomb: 1.2 s); these bound it to ~60 ms a tool and ~300 ms a spec, once per schema
MAX_TOOL_SCHEMA_NODES = 1_000  # one function tool's parameters: its objects, arrays and the values in them
MAX_TOOLS_SCHEMA_NODES = 5_000  # all of a spec's function tools together


@functools.lru_cache(maxsize=256)
def schema_error(canonical: str) -> str | None:
    """Why the schema (as canonical JSON) is no valid JSON Schema, or ``None``: checked once per distinct schema
    (an agent's tools are validated again at every run, a response's at admission and in its run)."""
    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(canonical))
    except jsonschema.SchemaError as exc:
        return str(exc.message)
    return None


class Strict(BaseModel):
    # strict: a JSON body's values keep their types ("yes" is not true, "7" is not 7), as the API documents them
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def checked_schema(value: dict[str, Any], field: str, *, an_object: bool = False) -> dict[str, Any]:
    """``value`` if it is a JSON Schema of at most ``MAX_TOOL_SCHEMA_NODES`` nodes (with ``an_object``, of type
    ``object``); else a ``ValueError`` naming ``field``."""
    if schema_nodes(value, past=MAX_TOOL_SCHEMA_NODES) > MAX_TOOL_SCHEMA_NODES:
        raise ValueError(f"{field} has more than {MAX_TOOL_SCHEMA_NODES:,} nodes (JSON values, nested)")
    error = schema_error(json.dumps(value, sort_keys=True))
    if error is not None:
        raise ValueError(f"{field} is not a valid JSON Schema: {error}")
    if an_object and value.get("type") != "object":
        raise ValueError(f"{field} must be a JSON Schema with type 'object'")
    return value
