"""The one tokenizer approximation used everywhere: a token is at most ``CHARS_PER_TOKEN`` (4) characters.

A token is up to four word characters (with one whitespace character before them), a single other non-space
character (with one whitespace before it), or up to four whitespace characters: a word of up to four letters is
one token, ``"microsecond"`` three, and a 10,000-character string without spaces 2,500, however it is written
(real tokenizers average about four characters a token on English). Every character of a text is in exactly one
token, so ``"".join(split_tokens(text)) == text`` and a text cut after its n-th token is n tokens long.
Chat prompts add ``MESSAGE_OVERHEAD_TOKENS`` per message and ``REPLY_PRIMING_TOKENS`` once, as OpenAI's
accounting does; tool definitions count as their JSON text. Content parts count their text (``text``,
``refusal``); an image, audio or file part counts ``MEDIA_PART_TOKENS`` (OpenAI's base cost of a low-detail
image: the media themselves are not decoded). The simulator's text is made of such tokens, so
counting a completion's text gives exactly its ``completion_tokens``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CHARS_PER_TOKEN", "count_prompt_tokens", "count_tokens", "split_tokens"]

MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3
MEDIA_PART_TOKENS = 85
CHARS_PER_TOKEN = 4
_TOKEN = re.compile(rf"\s?\w{{1,{CHARS_PER_TOKEN}}}|\s?[^\w\s]|\s{{1,{CHARS_PER_TOKEN}}}")


def split_tokens(text: str) -> list[str]:
    """``text`` as its tokens, in order; joined they give ``text`` back."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    """How many tokens ``text`` holds (without building the list: a prompt may be megabytes)."""
    return sum(1 for _ in _TOKEN.finditer(text))


def _content_tokens(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return count_tokens(content)
    if isinstance(content, Sequence):  # content parts: [{"type": "text", "text": ...}, {"type": "image_url", ...}]
        total = 0
        for part in content:
            if not isinstance(part, Mapping):
                continue
            text = part.get("text", part.get("refusal"))
            total += count_tokens(str(text)) if text is not None else MEDIA_PART_TOKENS
        return total
    return count_tokens(str(content))


def count_prompt_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()) -> int:
    """Prompt tokens of a chat request: message texts, tool calls and tool definitions."""
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS + _content_tokens(message.get("content"))
        calls = list(message.get("tool_calls") or ())
        if message.get("function_call"):  # OpenAI's legacy form of one tool call
            calls.append({"function": message["function_call"]})
        for call in calls:
            function = call.get("function") or call.get("custom") or {}
            total += count_tokens(str(function.get("name", ""))) + count_tokens(str(function.get("arguments", "")))
            total += count_tokens(str(function.get("input", "")))
    if tools:
        total += count_tokens(json.dumps(list(tools), sort_keys=True))
    return total
