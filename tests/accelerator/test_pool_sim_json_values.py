"""The sim model's structured values: ``pattern`` strings, optional properties, and the shapes instructor and the
``openai`` SDK's strict schemas send (``pool/sim_json.py``, ``pool/sim_pattern.py``)."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from switchyard.accelerator.pool import InferenceRequest, complete
from switchyard.accelerator.pool.sim_json import MAX_ANSWER_NODES, AnswerBudget, SchemaInstance
from switchyard.accelerator.pool.sim_pattern import MAX_MATCH_CHARS, candidates, matches

# instructor's Iterable[Task] as its tools mode sends it: no property is required
ITERABLE_TASKS = {
    "$defs": {
        "Task": {
            "properties": {"name": {"type": "string"}, "priority": {"type": "integer"}},
            "required": ["name", "priority"],
            "type": "object",
        }
    },
    "properties": {"tasks": {"items": {"$ref": "#/$defs/Task"}, "type": "array", "default": []}},
    "type": "object",
    "required": [],
}


def _reply(schema: dict[str, Any], *, seed: int = 1, tools: bool = False) -> Any:
    messages = [{"role": "user", "content": "extract"}]
    if tools:
        tool = {"type": "function", "function": {"name": "extract", "parameters": schema}}
        forced = InferenceRequest(
            request_id="r", tenant="t", model="m", messages=messages, tools=[tool], tool_choice="required", seed=seed
        )
        return json.loads(complete(forced).tool_calls[0].arguments)
    answer_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    request = InferenceRequest(
        request_id="r", tenant="t", model="m", messages=messages, response_format=answer_format, seed=seed
    )
    return json.loads("".join(complete(request).text_tokens))


class Place(BaseModel):
    zip_code: str = Field(pattern=r"^\d{5}$")
    country: str = Field(pattern=r"^[A-Z]{2}$")
    phone: str = Field(pattern=r"^\+?[1-9]\d{6,14}$")
    slug: str = Field(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$", max_length=20)
    colour: str = Field(pattern=r"^#(?:[0-9a-fA-F]{3}){1,2}$")


@pytest.mark.parametrize("seed", range(20))
def test_strings_match_their_schemas_pattern(seed: int) -> None:
    schema = Place.model_json_schema()
    value = _reply(schema, seed=seed)
    jsonschema.validate(value, schema)
    Place.model_validate(value)
    assert _reply(schema, seed=seed) == value  # the same request, the same answer


@pytest.mark.parametrize(
    "pattern",
    [
        r"^\d{5}$",
        r"^(?:[01]\d|2[0-3]):[0-5]\d$",
        r"^[^\s@]+@[^\s@]+\.[^\s@]+$",
        r"^(foo|bar)+baz?$",
        r"[A-Z]{3}",  # unanchored: matches anywhere
        r"^\w+(\.\w+)*$",
        r"^(?<year>\d{4})-(?<month>0[1-9]|1[0-2])$",
        r"^a{2,}b*?c?$",
        r"^[\u0041-\u005A]{2}\x2D\d$",
        r"^\$\d+\.\d{2}$",
    ],
)
def test_generated_strings_match_common_patterns(pattern: str) -> None:
    strings = list(candidates(pattern, random.Random(7)))
    assert strings
    assert all(matches(pattern, s) for s in strings)


def test_a_pattern_outside_the_subset_keeps_the_plain_value_and_never_hangs() -> None:
    for pattern in [r"(?=a)b", r"\p{L}+", r"(a)\1", "a{3,1}", "[z-a]", "(unclosed", "x" * 2_000]:
        assert list(candidates(pattern, random.Random(1))) == []
    schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": r"(?=a)b"}}}
    assert _reply(schema) == {"word": "sample"}
    # an empty group repeated without end costs steps, not time or characters
    assert all(len(s) <= MAX_MATCH_CHARS for s in candidates("((){100000}){100000}x{100000}", random.Random(1)))


def test_pattern_work_is_paid_from_the_answer_budget() -> None:
    huge = {"type": "string", "pattern": r"^\d{9000}$"}
    schema = {"type": "array", "items": huge, "minItems": 50}
    budget = AnswerBudget()
    value = SchemaInstance(schema, budget, random.Random(1)).of(schema)
    assert budget.exhausted  # 50 strings of 9,000 digits do not fit its characters
    assert sum(len(v or "") for v in value) <= 32_768
    assert budget.nodes_left <= MAX_ANSWER_NODES


def test_a_string_matching_its_pattern_already_is_kept() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-z]+$"}}, "required": ["a"]}
    assert _reply(schema) == {"a": "sample"}
    dated = {"type": "object", "properties": {"d": {"type": "string", "format": "date", "pattern": r"^\d{4}-"}}}
    assert _reply(dated) == {"d": "2026-01-01"}


def test_iterable_extractions_get_a_non_empty_list_of_items() -> None:
    for tools in (False, True):
        value = _reply(ITERABLE_TASKS, tools=tools)
        assert value["tasks"], value
        jsonschema.validate(value, ITERABLE_TASKS)
    no_list = {k: v for k, v in ITERABLE_TASKS.items() if k != "required"}
    assert _reply(no_list)["tasks"]


def test_optional_properties_are_filled_about_half_the_time_seeded_by_the_request() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, **{f"note{i}": {"type": "string"} for i in range(8)}},
        "required": ["id"],
    }
    filled = [len(_reply(schema, seed=seed)) - 1 for seed in range(40)]
    assert all(_reply(schema, seed=seed)["id"] == 1 for seed in range(3))
    share = sum(filled) / (8 * 40)
    assert 0.35 < share < 0.65  # OPTIONAL_PROPERTY_CHANCE is 0.5
    assert [len(_reply(schema, seed=seed)) - 1 for seed in range(40)] == filled  # reproducible


def test_a_hinted_optional_property_is_always_given() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    }
    tool = {"type": "function", "function": {"name": "weather", "parameters": schema}}
    for seed in range(10):
        messages = [{"role": "user", "content": "weather city=Oslo unit=c"}]
        request = InferenceRequest(request_id="r", tenant="t", model="m", messages=messages, tools=[tool], seed=seed)
        call = complete(request).tool_calls[0]
        assert json.loads(call.arguments) == {"city": "Oslo", "unit": "c"}


def test_a_scalar_default_is_still_the_answer() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 7}, "tags": {"default": ["a"]}}}
    assert _reply(schema) == {"n": 7, "tags": ["a"]}


def test_strict_schemas_with_patterns_validate() -> None:
    openai = pytest.importorskip("openai")
    strict = openai.lib._pydantic.to_strict_json_schema(Place)
    for seed in range(5):
        value = _reply(strict, seed=seed)
        jsonschema.validate(value, strict)
        assert re.fullmatch(r"\d{5}", value["zip_code"])
