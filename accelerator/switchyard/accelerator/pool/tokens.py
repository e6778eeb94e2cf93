"""The one tokenizer approximation used everywhere: words and punctuation marks are tokens.

A token is a run of word characters (with the whitespace before it) or a single other non-space character.
Chat prompts add ``MESSAGE_OVERHEAD_TOKENS`` per message and ``REPLY_PRIMING_TOKENS`` once, as OpenAI's
accounting does; tool definitions count as their JSON text. The simulator's text is made of such tokens, so
counting a completion's text gives exactly its ``completion_tokens``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["count_prompt_tokens", "count_tokens", "split_tokens"]

MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3
_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]")


def split_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content parts: [{"type": "text", "text": ...}, ...]
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


def count_prompt_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()) -> int:
    """Prompt tokens of a chat request: message texts, tool calls and tool definitions."""
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS + count_tokens(_content_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            total += count_tokens(str(function.get("name", ""))) + count_tokens(str(function.get("arguments", "")))
    if tools:
        total += count_tokens(json.dumps(list(tools), sort_keys=True))
    return total
