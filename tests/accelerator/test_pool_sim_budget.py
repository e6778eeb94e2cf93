"""One request's work in the sim model is bounded, whatever schema a tenant sends (issue 22, findings 1 and 2).

The attacks of the issue, measured by what they cost (how much of the schema was read, how long the answer is,
how many tokens it counts), never by time: a schema bomb of ``allOf`` parts that re-enter the root through
``$ref: "#"``, an array of huge strings, a tool whose properties each ask for the most, and tool calls cut at
``max_tokens`` like text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from switchyard.accelerator.pool import InferenceRequest, complete, count_tokens
from switchyard.accelerator.pool.tokens import split_tokens

HUGE_STRINGS = {"type": "array", "minItems": 5000, "items": {"type": "string", "minLength": 100_000}}
MOST_ANSWER_CHARS = 100_000  # the README's per-request limit is below this; the attacks asked for 20-60 MB


class CountingSchema(Mapping[str, Any]):
    """A client's schema as a read-only mapping that counts every key the generator reads from it: the work of
    walking the schema, which no answer size shows (a bomb's answer can be small)."""

    def __init__(self, value: Mapping[str, Any], reads: list[int]) -> None:
        self._value = value
        self._reads = reads

    @classmethod
    def wrap(cls, value: Any, reads: list[int]) -> Any:
        if isinstance(value, Mapping):
            return cls({k: cls.wrap(v, reads) for k, v in value.items()}, reads)
        if isinstance(value, list):
            return [cls.wrap(v, reads) for v in value]
        return value

    def __getitem__(self, key: str) -> Any:
        self._reads[0] += 1
        return self._value[key]

    def __iter__(self) -> Iterator[str]:
        self._reads[0] += len(self._value)
        return iter(self._value)

    def __len__(self) -> int:
        return len(self._value)


def _request(messages: list[dict[str, Any]], **kw: Any) -> InferenceRequest:
    return InferenceRequest(request_id="r", tenant="t", model="m", messages=messages, **kw)


def _json_schema(schema: Any, **kw: Any) -> InferenceRequest:
    response_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    return _request([{"role": "user", "content": "go"}], response_format=response_format, **kw)


def _tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": list(properties)}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def test_a_token_is_at_most_four_characters_after_one_space() -> None:
    assert count_tokens("x" * 10_000) == 2_500
    text = "Hello,   world!\n\n" + "y" * 9 + " " * 11 + "end"
    tokens = split_tokens(text)
    assert "".join(tokens) == text  # nothing is dropped: a cut on a token boundary keeps every character before it
    assert all(1 <= len(token) <= 5 and len(token.lstrip()) <= 4 for token in tokens)
    assert tokens[:3] == ["Hell", "o", ","]
    assert count_tokens(" " * 10_000) == 2_500


def test_a_schema_bomb_of_allof_parts_reentering_the_root_reads_a_bounded_part_of_it() -> None:
    """The issue's bomb: each ``allOf`` part re-enters the root by ``$ref: "#"`` (to depth 48), each level copied
    the merged properties again: 3,500 parts stalled the fleet process for 3 s."""
    parts: list[Any] = [{"$ref": "#"}] + [{"properties": {f"p{i}": {}}} for i in range(1, 3_500)]
    reads = [0]
    schema = CountingSchema.wrap({"allOf": parts}, reads)
    completion = complete(_json_schema(schema))
    assert reads[0] <= 50_000, reads[0]  # it read ~850,000 keys (and copied dicts quadratically) before the fix
    answer = "".join(completion.text_tokens)
    assert len(answer) <= MOST_ANSWER_CHARS
    assert completion.finish_reason == "length"  # the budget ran out: the answer is cut, and says so


def test_an_array_of_huge_strings_is_cut_at_the_answer_budget_and_counted_honestly() -> None:
    completion = complete(_json_schema(HUGE_STRINGS))
    answer = "".join(completion.text_tokens)
    assert len(answer) <= MOST_ANSWER_CHARS  # 20 MB before the fix
    assert completion.finish_reason == "length"
    assert completion.completion_tokens == count_tokens(answer) >= len(answer) / 5  # 7,997 tokens for 20 MB before


def test_a_tools_properties_share_one_budget() -> None:
    """The node cap reset for each property: three huge properties made 60 MB of arguments."""
    tool = _tool("bomb", {"a": HUGE_STRINGS, "b": HUGE_STRINGS, "c": HUGE_STRINGS})
    completion = complete(_request([{"role": "user", "content": "go"}], tools=[tool], tool_choice="required"))
    ((call),) = completion.tool_calls
    assert len(call.arguments) <= MOST_ANSWER_CHARS
    assert completion.finish_reason == "length"
    assert completion.completion_tokens == count_tokens(call.name) + count_tokens(call.arguments)


def test_tool_call_arguments_count_toward_max_tokens_and_are_cut_there() -> None:
    """finding 2: max_output_tokens 16 and a forced tool of 10 arrays gave 40,042 output tokens."""
    tool = _tool("fill", {f"list{i}": {"type": "array", "minItems": 2_000} for i in range(10)})
    asked = [{"role": "user", "content": "go"}]
    cut = complete(_request(asked, tools=[tool], tool_choice="required", max_tokens=16))
    ((call),) = cut.tool_calls
    assert (cut.finish_reason, cut.completion_tokens) == ("length", 16)
    assert count_tokens(call.name) + count_tokens(call.arguments) == 16
    whole = complete(_request(asked, tools=[tool], tool_choice="required", max_tokens=100_000))
    assert whole.tool_calls[0].arguments.startswith(call.arguments)  # the same call, cut where the limit fell
    assert whole.finish_reason == "length"  # the answer budget ran out before the schema was satisfied
    nothing = complete(_request(asked, tools=[tool], tool_choice="required", max_tokens=1))
    assert (nothing.tool_calls, nothing.text_tokens, nothing.finish_reason) == ((), (), "length")
    assert nothing.completion_tokens == 0  # not even the tool's name fits: no call at all


def test_a_small_tool_call_within_max_tokens_is_whole() -> None:
    tool = _tool("get_weather", {"city": {"type": "string"}})
    completion = complete(_request([{"role": "user", "content": "city=Paris"}], tools=[tool], tool_choice="required"))
    ((call),) = completion.tool_calls
    assert (json.loads(call.arguments), completion.finish_reason) == ({"city": "Paris"}, "tool_calls")


def test_json_answers_count_toward_max_tokens() -> None:
    completion = complete(_json_schema(HUGE_STRINGS, max_tokens=7))
    assert (completion.finish_reason, completion.completion_tokens) == ("length", 7)
    assert len("".join(completion.text_tokens)) <= 7 * 5
