"""The sim language model's documented policy, and the one token counter."""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from switchyard.accelerator.pool import InferenceRequest, complete, count_prompt_tokens, count_tokens
from switchyard.accelerator.pool.tokens import MEDIA_PART_TOKENS

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city", "days", "unit"],
        },
    },
}


def _request(messages: list[dict[str, object]], **kw: object) -> InferenceRequest:
    return InferenceRequest(request_id="r", tenant="t", model="m", messages=messages, **kw)  # type: ignore[arg-type]


def test_text_drawn_longer_than_max_tokens_is_cut_there_and_is_deterministic() -> None:
    request = _request([{"role": "user", "content": "hello"}], max_tokens=17, seed=3)
    assert complete(_request(request.messages, seed=3)).completion_tokens > 17  # the drawn length
    first, second = complete(request), complete(request)
    assert first == second
    assert first.finish_reason == "length"
    assert first.completion_tokens == 17
    assert count_tokens("".join(first.text_tokens)) == 17


def test_text_drawn_shorter_than_max_tokens_stops_on_its_own() -> None:
    asked = [{"role": "user", "content": "q"}]
    stopped = 0
    for seed in range(60):
        drawn = complete(_request(asked, seed=seed))
        capped = complete(_request(asked, seed=seed, max_tokens=150))
        if drawn.completion_tokens <= 150:
            assert capped == drawn  # the cap changes nothing: the model stopped first
            assert capped.finish_reason == "stop"
            assert "".join(capped.text_tokens).endswith(".")
            stopped += 1
        else:
            assert (capped.finish_reason, capped.completion_tokens) == ("length", 150)
    assert 0 < stopped < 60  # both happen: the trace's median is 129 tokens


def test_ignore_eos_writes_exactly_max_tokens_and_min_tokens_raises_the_drawn_length() -> None:
    asked = [{"role": "user", "content": "q"}]
    short_seed = next(s for s in range(100) if complete(_request(asked, seed=s)).completion_tokens < 100)
    drawn = complete(_request(asked, seed=short_seed))
    forced = complete(_request(asked, seed=short_seed, max_tokens=300, ignore_eos=True))
    assert (forced.finish_reason, forced.completion_tokens) == ("length", 300)
    assert complete(_request(asked, seed=short_seed, ignore_eos=True)) == drawn  # no limit to run to
    at_least = complete(_request(asked, seed=short_seed, min_tokens=120))
    assert (at_least.finish_reason, at_least.completion_tokens) == ("stop", 120)
    cut = complete(_request(asked, seed=short_seed, min_tokens=120, max_tokens=110))
    assert (cut.finish_reason, cut.completion_tokens) == ("length", 110)


def test_length_without_max_tokens_follows_the_trace_distribution() -> None:
    lengths = [complete(_request([{"role": "user", "content": "q"}], seed=s)).completion_tokens for s in range(400)]
    lengths.sort()
    assert 90 <= lengths[200] <= 180  # the trace's median output is 129 tokens
    assert all(2 <= n <= 1000 for n in lengths)
    assert complete(_request([{"role": "user", "content": "q"}], seed=1)).finish_reason == "stop"


def test_mentioned_tool_is_called_with_schema_arguments_and_hints() -> None:
    request = _request([{"role": "user", "content": "use get_weather city=Paris days=3"}], tools=[WEATHER])
    completion = complete(request)
    assert completion.finish_reason == "tool_calls"
    (call,) = completion.tool_calls
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris", "days": 3, "unit": "c"}


def test_tool_choice_none_or_no_mention_gives_text() -> None:
    asked = [{"role": "user", "content": "use get_weather"}]
    assert complete(_request(asked, tools=[WEATHER], tool_choice="none", max_tokens=5)).tool_calls == ()
    plain = [{"role": "user", "content": "just talk"}]
    assert complete(_request(plain, tools=[WEATHER], max_tokens=5)).tool_calls == ()
    forced = complete(_request(plain, tools=[WEATHER], tool_choice="required"))
    assert forced.tool_calls[0].name == "get_weather"


def test_answer_after_tool_result_uses_it() -> None:
    messages = [
        {"role": "user", "content": "use get_weather"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny 21C"},
    ]
    completion = complete(_request(messages, tools=[WEATHER], max_tokens=40))
    text = "".join(completion.text_tokens)
    assert text.startswith("Result of get_weather: sunny 21C")
    assert completion.completion_tokens == 40


def test_prompt_tokens_count_messages_tools_and_overheads() -> None:
    messages = [{"role": "user", "content": "Hello, world!"}]
    assert count_prompt_tokens(messages) == 3 + 4 + 6  # priming + overhead + "Hell" "o" "," " worl" "d" "!"
    assert count_prompt_tokens(messages, [WEATHER]) > count_prompt_tokens(messages)


def test_json_object_format_answers_a_json_object() -> None:
    asked = [{"role": "user", "content": "Answer in JSON"}]
    completion = complete(_request(asked, response_format={"type": "json_object"}, seed=4))
    answer = json.loads("".join(completion.text_tokens))
    assert isinstance(answer, dict)
    assert answer["answer"]
    assert completion.finish_reason == "stop"
    assert completion.completion_tokens == count_tokens("".join(completion.text_tokens))
    cut = complete(_request(asked, response_format={"type": "json_object"}, seed=4, max_tokens=3))
    assert (cut.finish_reason, cut.completion_tokens) == ("length", 3)


class Address(BaseModel):
    street: str
    zip_code: str = Field(min_length=5, max_length=5)


class Person(BaseModel):
    name: str
    age: int = Field(ge=18, lt=130)
    height_m: float = Field(gt=0, le=2.5)
    email: str = Field(json_schema_extra={"format": "email"})
    role: Literal["admin", "member"]
    tags: list[str] = Field(min_length=2)
    address: Address
    manager: Person | None
    previous: list[Address]


def _json_schema_reply(schema: dict[str, Any], **kw: object) -> Any:
    response_format = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": True}}
    completion = complete(_request([{"role": "user", "content": "who?"}], response_format=response_format, **kw))
    assert completion.finish_reason == "stop"
    return json.loads("".join(completion.text_tokens))


def test_json_schema_format_answers_json_valid_against_a_pydantic_schema() -> None:
    schema = Person.model_json_schema()  # $defs, $ref, anyOf with null, enum, bounds, lengths, a recursive model
    reply = _json_schema_reply(schema)
    jsonschema.validate(reply, schema)
    Person.model_validate(reply)


_SCALARS = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "minLength": 12},
        {"type": "string", "maxLength": 3},
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "uuid"},
        {"type": "integer"},
        {"type": "integer", "minimum": -5, "maximum": -2},
        {"type": "integer", "exclusiveMinimum": 10, "multipleOf": 7},
        {"type": "number", "exclusiveMaximum": 0},
        {"type": "number", "minimum": 0.5, "maximum": 0.75},
        {"type": "boolean"},
        {"type": "null"},
        {"enum": ["b", "a"]},
        {"const": 42},
        {"type": ["null", "string"]},
    ]
)


def _compose(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.text("abcdefgh_", min_size=1, max_size=6)
    return st.one_of(
        st.builds(
            lambda items, least: {"type": "array", "items": items, "minItems": least}, children, st.integers(0, 3)
        ),
        st.dictionaries(names, children, max_size=4).map(
            lambda props: {
                "type": "object",
                "properties": props,
                "required": sorted(props),
                "additionalProperties": False,
            }
        ),
        st.lists(children, min_size=1, max_size=3).map(lambda options: {"anyOf": options}),
        st.lists(children, min_size=1, max_size=2).map(
            lambda parts: {"allOf": [{"type": "object", "properties": {f"p{i}": p}} for i, p in enumerate(parts)]}
        ),
    )


@settings(max_examples=200, deadline=None)
@given(st.recursive(_SCALARS, _compose, max_leaves=12), st.booleans(), st.integers(0, 2**32))
def test_json_schema_replies_validate_against_their_schema(schema: dict[str, Any], by_ref: bool, seed: int) -> None:
    value = {"$ref": "#/$defs/value"} if by_ref else schema
    wrapped = {"type": "object", "properties": {"value": value}, "required": ["value"], "$defs": {"value": schema}}
    jsonschema.validate(_json_schema_reply(wrapped, seed=seed), wrapped)


def test_text_ends_before_the_first_stop_sequence() -> None:
    asked = [{"role": "user", "content": "talk"}]
    full = "".join(complete(_request(asked, seed=9, max_tokens=60, ignore_eos=True)).text_tokens)
    word = full.split()[5]
    stopped = complete(_request(asked, seed=9, max_tokens=60, ignore_eos=True, stop=("never there", word)))
    assert stopped.finish_reason == "stop"
    text = "".join(stopped.text_tokens)
    assert text == full[: full.index(word)].rstrip()
    assert word not in text
    assert stopped.completion_tokens == count_tokens(text)
    unmatched = complete(_request(asked, seed=9, max_tokens=60, ignore_eos=True, stop=("never there",)))
    assert (unmatched.finish_reason, "".join(unmatched.text_tokens)) == ("length", full)
    as_json = complete(_request(asked, response_format={"type": "json_object"}, stop=('":',)))
    assert "".join(as_json.text_tokens) == '{"answer'


def test_allowed_tools_choice_restricts_the_tools_and_custom_choices_answer_text() -> None:
    other = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
    asked = [{"role": "user", "content": "use get_weather"}]
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "get_time"}}]},
    }
    completion = complete(_request(asked, tools=[WEATHER, other], tool_choice=allowed))
    assert [c.name for c in completion.tool_calls] == ["get_time"]
    auto = {**allowed, "allowed_tools": {**allowed["allowed_tools"], "mode": "auto"}}  # type: ignore[dict-item]
    assert complete(_request(asked, tools=[WEATHER, other], tool_choice=auto, max_tokens=4)).tool_calls == ()
    custom = {"type": "custom", "custom": {"name": "grep"}}
    assert complete(_request(asked, tools=[WEATHER], tool_choice=custom, max_tokens=4)).tool_calls == ()


def test_tool_arguments_follow_refs_in_the_parameters_schema() -> None:
    tool = {"type": "function", "function": {"name": "move", "parameters": Person.model_json_schema()}}
    (call,) = complete(_request([{"role": "user", "content": "x"}], tools=[tool], tool_choice="required")).tool_calls
    jsonschema.validate(json.loads(call.arguments), Person.model_json_schema())


def test_prompt_tokens_count_content_parts_media_and_legacy_calls() -> None:
    text = [{"role": "user", "content": "Hello, world!"}]
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello,", "cache_control": {"type": "ephemeral"}}]}]
    parts[0]["content"].append({"type": "text", "text": " world!"})  # type: ignore[attr-defined]
    assert count_prompt_tokens(parts) == count_prompt_tokens(text)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with_image = [{"role": "user", "content": [{"type": "text", "text": "Hello, world!"}, image]}]
    assert count_prompt_tokens(with_image) == count_prompt_tokens(text) + MEDIA_PART_TOKENS
    called = [{"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": '{"a": 1}'}}]
    assert count_prompt_tokens(called) == 3 + 4 + count_tokens('f{"a": 1}')


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "minItems": 10**9, "items": {"type": "array", "minItems": 10**9}},
        {"type": "string", "minLength": 10**12},
        {"type": "number", "minimum": 1e308, "multipleOf": 1e-300},
        {"type": "integer", "minimum": float("nan")},
        {"type": "object", "properties": {"me": {"$ref": "#"}}, "required": ["me"]},
        {"allOf": [{"$ref": "#/$defs/missing"}, "not a schema"], "properties": []},
    ],
    ids=["huge arrays", "huge string", "unreachable multiple", "nan bound", "endless self", "garbage"],
)
def test_a_clients_hostile_schema_gets_a_bounded_answer(schema: dict[str, Any]) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    completion = complete(_request([{"role": "user", "content": "go"}], response_format=response_format))
    json.loads("".join(completion.text_tokens))
    assert completion.completion_tokens < 20_000


def test_a_schema_of_null_answers_null() -> None:
    assert _json_schema_reply({"type": "null"}) is None


def test_json_object_format_follows_a_schema_written_into_the_instructions() -> None:
    # instructor's JSON mode: the schema in the system message, response_format json_object
    schema = json.dumps(Person.model_json_schema(), indent=2)
    instructions = f"Return the parsed objects in json that match the following json_schema:\n\n{schema}\n\nThanks."
    messages = [
        {"role": "system", "content": instructions},
        {"role": "user", "content": "Ann {is} 30, see {'not': json}"},
    ]
    completion = complete(_request(messages, response_format={"type": "json_object"}))
    Person.model_validate_json("".join(completion.text_tokens))
    unclosed = [{"role": "user", "content": '{"properties": ' * 5000}]
    plain = json.loads("".join(complete(_request(unclosed, response_format={"type": "json_object"})).text_tokens))
    assert list(plain) == ["answer"]


def test_a_forced_tool_is_called_once_per_user_turn_even_after_tool_results() -> None:
    final = {"type": "function", "function": {"name": "final_result", "parameters": {"type": "object"}}}
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    after_weather = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    tools = [WEATHER, final]
    (then,) = complete(_request(after_weather, tools=tools, tool_choice="required")).tool_calls
    assert then.name == "final_result"  # "required": the tool not called yet this turn
    assert complete(_request(after_weather, tools=[WEATHER], tool_choice="required", max_tokens=4)).tool_calls == ()
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert complete(_request(after_weather, tools=tools, tool_choice=named, max_tokens=4)).tool_calls == ()
    named_final = {"type": "function", "function": {"name": "final_result"}}
    (forced,) = complete(_request(after_weather, tools=tools, tool_choice=named_final)).tool_calls
    assert forced.name == "final_result"
    assert complete(_request(after_weather, tools=tools, max_tokens=4)).tool_calls == ()  # auto: text


def test_an_answer_after_tool_results_quotes_them_whole_however_short_its_drawn_length() -> None:
    result = "Ferry timetable: " + ", ".join(f"departure {h:02d}:15" for h in range(24))
    call = {"id": "c1", "type": "function", "function": {"name": "timetable", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "when does the ferry leave?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]
    quote_tokens = count_tokens(f"Result of timetable: {result}.")
    drawn = [complete(_request([{"role": "user", "content": "q"}], seed=s)).completion_tokens for s in range(30)]
    assert min(drawn) < quote_tokens  # some draws are shorter than the quote
    for seed in range(30):
        answer = complete(_request(messages, seed=seed, max_tokens=1000))  # no draw is longer
        assert answer.finish_reason == "stop"
        assert "".join(answer.text_tokens).startswith(f"Result of timetable: {result}.")
    cut = complete(_request(messages, seed=1, max_tokens=20))
    assert (cut.finish_reason, cut.completion_tokens) == ("length", 20)
