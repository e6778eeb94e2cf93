"""The hash chain of a live prompt's KV blocks, computed from its actual tokens, for the simulated prefix cache.

A chat prompt is laid out as the pool counts it (``tokens.py``): the tool schemas first (their sorted JSON, as
a serving engine's chat template renders them ahead of the conversation), then every message in order (a role
marker, its content's tokens, its tool calls' names and arguments), then the reply priming. The token stream
is cut into blocks of ``PROMPT_BLOCK_TOKENS`` tokens, and each full block gets a 63-bit id that hashes the
previous block's id and the block's token text, as vLLM's block hashes do: two prompts share a block id exactly
when they share every token up to the end of that block. So an agent's instructions and tool schemas, and a
session's history re-sent on its next turn, map to the same leading ids, and a different prompt to others.

The chain starts from the tenant (vLLM's ``cache_salt``): one tenant's prompt never hits another tenant's cached
blocks, so cached tokens on the wire say nothing about what other tenants sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from switchyard.accelerator.pool.tokens import (
    MEDIA_PART_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    split_tokens,
)

__all__ = ["PROMPT_BLOCK_TOKENS", "prompt_block_hashes"]

PROMPT_BLOCK_TOKENS = 32  # one KV page of the simulated engine (EngineConfig.block_tokens)
_SEPARATOR = "\x1f"  # between a block's tokens, so that token boundaries are part of its identity


def _content(content: Any) -> Iterator[str]:
    if content is None:
        return
    if isinstance(content, str):
        yield from split_tokens(content)
    elif isinstance(content, Sequence):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            text = part.get("text", part.get("refusal"))
            if text is not None:
                yield from split_tokens(str(text))
            else:  # a media part: as many tokens as it is counted, all naming the part
                marker = "<media:" + hashlib.blake2b(json.dumps(part, sort_keys=True, default=str).encode()).hexdigest()
                yield from [marker] * MEDIA_PART_TOKENS
    else:
        yield from split_tokens(str(content))


def _prompt_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """The prompt's tokens in the order a chat template lays them out (see the module docstring)."""
    if tools:
        yield from split_tokens(json.dumps(list(tools), sort_keys=True))
    for message in messages:
        yield from [f"<|{message.get('role')}|>"] * MESSAGE_OVERHEAD_TOKENS
        yield from _content(message.get("content"))
        calls = list(message.get("tool_calls") or ())
        if message.get("function_call"):
            calls.append({"function": message["function_call"]})
        for call in calls:
            function = call.get("function") or call.get("custom") or {}
            for field in ("name", "arguments", "input"):
                yield from split_tokens(str(function.get(field, "")))
    yield from ["<|assistant|>"] * REPLY_PRIMING_TOKENS


def prompt_block_hashes(
    tenant: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] = (),
    *,
    block_tokens: int = PROMPT_BLOCK_TOKENS,
) -> tuple[int, ...]:
    """The ids of the prompt's full blocks of ``block_tokens`` tokens, each chained on every token before it."""
    previous = hashlib.blake2b(tenant.encode(), digest_size=8).digest()
    hashes: list[int] = []
    block: list[str] = []
    for token in _prompt_tokens(messages, tools):
        block.append(token)
        if len(block) == block_tokens:
            previous = hashlib.blake2b(previous + _SEPARATOR.join(block).encode(), digest_size=8).digest()
            hashes.append(int.from_bytes(previous, "big") >> 1)
            block = []
    return tuple(hashes)
