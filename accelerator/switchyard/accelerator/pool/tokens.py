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

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CHARS_PER_TOKEN",
    "LARGE_PROMPT_CHARS",
    "count_prompt_tokens",
    "count_prompt_tokens_off_loop",
    "count_tokens",
    "split_tokens",
]

MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3
MEDIA_PART_TOKENS = 85
CHARS_PER_TOKEN = 4
LARGE_PROMPT_CHARS = 32_768  # counted in a thread past this: ~1.5 ms of the loop's CPU (~50 ms a megabyte)
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


def _text_chars(messages: Sequence[Mapping[str, Any]]) -> int:
    """About how many characters the messages' texts hold (content parts and tool calls by their ``str``)."""
    total = 0
    for message in messages:
        content = message.get("content")
        total += len(content) if isinstance(content, str) else len(str(content)) if content else 0
        if message.get("tool_calls") or message.get("function_call"):
            total += len(str(message.get("tool_calls"))) + len(str(message.get("function_call")))
    return total


async def count_prompt_tokens_off_loop(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
) -> int:
    """``count_prompt_tokens``, in a worker thread when the prompt is large (past ``LARGE_PROMPT_CHARS`` of text,
    or any tools: their JSON text is what is counted, and a tenant's schema may be hundreds of kilobytes), so that
    the event loop serving every other tenant goes on meanwhile."""
    if tools or _text_chars(messages) > LARGE_PROMPT_CHARS:
        return await asyncio.to_thread(count_prompt_tokens, messages, tools)
    return count_prompt_tokens(messages, tools)
