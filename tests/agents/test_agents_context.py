"""Context assembly: the system message stays, recent whole turns fit, calls never lose their results."""

from __future__ import annotations

import pytest

from switchyard.agents import ContextOverflowError, Message, ToolCall, assemble_context
from switchyard.agents.context import MESSAGE_OVERHEAD_TOKENS, message_tokens


def words(text: str) -> int:
    """One token per word: easy to reason about in tests."""
    return len(text.split())


def call(call_id: str) -> Message:
    return Message.assistant(None, [ToolCall(id=call_id, name="f", arguments="{}")])


HISTORY = [
    Message.user("one two three four five"),  # 5 + 4
    Message.assistant("six seven"),  # 2 + 4
    Message.user("eight"),  # 1 + 4
    call("c1"),  # f + {} = 2 + 4
    Message.tool("c1", "result words here"),  # 3 + 4
    Message.user("last question"),  # 2 + 4
]


def assemble(window: int, history: list[Message] | None = None, instructions: str = "sys") -> list[Message]:
    context = assemble_context(
        instructions=instructions,
        history=HISTORY if history is None else history,
        tools=[],
        context_window_tokens=window,
        reserved_output_tokens=10,
        counter=words,
    )
    return list(context.messages)


def test_everything_fits() -> None:
    assert assemble(1000) == [Message.system("sys"), *HISTORY]


def test_oldest_turns_are_dropped_first() -> None:
    # system 5; budget = 50 - 10 - 5 = 35: last(6) + tool(7) + call(6) + "eight"(5) + "six seven"(6) = 30
    messages = assemble(50)
    assert messages == [Message.system("sys"), *HISTORY[1:]]


def test_a_tool_call_is_never_split_from_its_result() -> None:
    # budget = 30 - 10 - 5 = 15: last(6) fits, the call+result unit (13) does not -> only the last question
    messages = assemble(30)
    assert messages == [Message.system("sys"), HISTORY[-1]]
    roles = [m.role for m in assemble(38)]
    assert roles == ["system", "assistant", "tool", "user"]


def test_orphan_tool_results_are_dropped() -> None:
    history = [Message.tool("gone", "old result"), Message.user("hi")]
    assert assemble(1000, history) == [Message.system("sys"), Message.user("hi")]


def test_overflow_of_the_latest_turn_is_an_error() -> None:
    with pytest.raises(ContextOverflowError):
        assemble(18)


def test_counts_and_dropped_messages_are_reported() -> None:
    context = assemble_context(
        instructions="",
        history=HISTORY,
        tools=[{"type": "function", "function": {"name": "f"}}],
        context_window_tokens=50,
        reserved_output_tokens=10,
        counter=words,
    )
    assert context.messages[0] == HISTORY[1]
    assert context.dropped_messages == 1
    assert context.input_tokens == words('[{"function": {"name": "f"}, "type": "function"}]') + sum(
        message_tokens(m, words) for m in HISTORY[1:]
    )
    assert message_tokens(HISTORY[3], words) == 2 + MESSAGE_OVERHEAD_TOKENS
