"""Context assembly: instructions plus as much recent history as fits the model's context window.

Strategy ("keep the newest whole turns"):

1. The system message (the agent's instructions) is always kept.
2. History is cut into *units*: an assistant message that calls tools together with the tool results
   answering it is one unit (a call is never separated from its result); every other message is a unit
   of its own. Tool results whose call is not in the history are dropped (no model accepts them).
3. The budget is the context window minus the output tokens reserved for the answer, minus the system
   message and the tool definitions. Units are taken from the newest backwards while they fit; the first
   unit that does not fit ends the selection, so the kept history is a contiguous recent suffix.
4. If even the newest unit does not fit, :class:`ContextOverflowError` is raised (the run fails with
   ``context_length_exceeded``) rather than sending a context without the latest turn.

Tokens are counted by one injected counter ``(text) -> int`` applied to each message's content, each tool
call's name and arguments, and the JSON of the tool definitions, plus a fixed overhead per message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from switchyard.agents.errors import ContextOverflowError
from switchyard.agents.messages import Message

__all__ = ["MESSAGE_OVERHEAD_TOKENS", "AssembledContext", "TokenCounter", "assemble_context", "message_tokens"]

#: ``counter(text)`` returns the number of tokens ``text`` takes for the model in use.
TokenCounter = Callable[[str], int]

#: Tokens a chat template adds around each message (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4


def message_tokens(message: Message, counter: TokenCounter) -> int:
    """Tokens one message takes in the context."""
    total = MESSAGE_OVERHEAD_TOKENS + counter(message.content or "")
    for call in message.tool_calls:
        total += counter(call.name) + counter(call.arguments)
    return total


@dataclass(frozen=True)
class AssembledContext:
    """The messages to send, their estimated input tokens and how many history messages were left out."""

    messages: tuple[Message, ...]
    input_tokens: int
    dropped_messages: int


def _units(history: Sequence[Message]) -> list[list[Message]]:
    units: list[list[Message]] = []
    open_calls: set[str] = set()
    for message in history:
        if message.role == "tool":
            if units and message.tool_call_id in open_calls:
                units[-1].append(message)
            continue  # an orphan result: its call is not in the history
        open_calls = {call.id for call in message.tool_calls} if message.role == "assistant" else set()
        units.append([message])
    return units


def assemble_context(
    *,
    instructions: str,
    history: Sequence[Message],
    tools: Sequence[dict[str, Any]],
    context_window_tokens: int,
    reserved_output_tokens: int,
    counter: TokenCounter,
) -> AssembledContext:
    """Select the messages for one model call; see the module docstring for the strategy."""
    system = [Message.system(instructions)] if instructions else []
    fixed = sum(message_tokens(m, counter) for m in system)
    if tools:
        fixed += counter(json.dumps(list(tools), sort_keys=True))
    budget = context_window_tokens - reserved_output_tokens - fixed
    units = _units(history)
    kept: list[list[Message]] = []
    used = 0
    for unit in reversed(units):
        cost = sum(message_tokens(m, counter) for m in unit)
        if used + cost > budget:
            break
        kept.append(unit)
        used += cost
    if units and not kept:
        raise ContextOverflowError(
            f"the latest turn needs more than the {budget} tokens left in a {context_window_tokens}-token window"
        )
    if budget < 0:
        raise ContextOverflowError(f"instructions and tools exceed the {context_window_tokens}-token window")
    selected = [m for unit in reversed(kept) for m in unit]
    return AssembledContext(
        messages=tuple(system + selected), input_tokens=fixed + used, dropped_messages=len(history) - len(selected)
    )
