"""The sim language model's documented policy, and the one token counter."""

from __future__ import annotations

import json

from switchyard.accelerator.pool import InferenceRequest, complete, count_prompt_tokens, count_tokens

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


def test_text_has_exactly_max_tokens_and_is_deterministic() -> None:
    request = _request([{"role": "user", "content": "hello"}], max_tokens=17, seed=3)
    first, second = complete(request), complete(request)
    assert first == second
    assert first.finish_reason == "length"
    assert first.completion_tokens == 17
    assert count_tokens("".join(first.text_tokens)) == 17


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
    assert count_prompt_tokens(messages) == 3 + 4 + 4  # priming + overhead + "Hello" "," " world" "!"
    assert count_prompt_tokens(messages, [WEATHER]) > count_prompt_tokens(messages)
