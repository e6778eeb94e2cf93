"""Hash chains of prompt blocks for generated workloads, and the hit rate one infinite prefix cache would reach.

A prompt is a sequence of segments (an agent's system prompt, a user message, an answer); its blocks of
`block_tokens` tokens get ids that depend on every token before them, as a serving engine's block hashes do:
an id is the chain (previous id, the block's segment pieces), numbered in order of first sight. Two prompts that
start with the same segments share the ids of their common full blocks, and only those.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from switchyard.accelerator.sim.requests import Request

__all__ = ["BlockChain", "BlockIds", "IdealHitRate", "ideal_hit_rate"]


class BlockIds:
    """Numbers block contents (previous id, pieces) in order of first sight: one namespace per workload."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, tuple[tuple[Hashable, int, int], ...]], int] = {}

    def id_of(self, previous: int, pieces: tuple[tuple[Hashable, int, int], ...]) -> int:
        return self._ids.setdefault((previous, pieces), len(self._ids))


class BlockChain:
    """The growing token stream of one conversation; `hashes` are the ids of its full blocks so far."""

    def __init__(self, ids: BlockIds, block_tokens: int) -> None:
        if block_tokens < 1:
            raise ValueError("block_tokens must be positive")
        self._ids = ids
        self.block_tokens = block_tokens
        self.hashes: list[int] = []
        self.tokens = 0
        self._pieces: list[tuple[Hashable, int, int]] = []  # the partial block at the end
        self._filled = 0

    def extend(self, segment: Hashable, tokens: int) -> None:
        """Append `tokens` tokens of `segment` (equal segments are equal token strings)."""
        offset = 0
        while offset < tokens:
            take = min(tokens - offset, self.block_tokens - self._filled)
            self._pieces.append((segment, offset, offset + take))
            self._filled += take
            offset += take
            if self._filled == self.block_tokens:
                previous = self.hashes[-1] if self.hashes else -1
                self.hashes.append(self._ids.id_of(previous, tuple(self._pieces)))
                self._pieces, self._filled = [], 0
        self.tokens += tokens


@dataclass(frozen=True, slots=True)
class IdealHitRate:
    """Share of prompt blocks (and tokens) served from one infinite cache shared by every replica."""

    blocks: float
    tokens: float


def ideal_hit_rate(requests: Sequence[Request]) -> IdealHitRate:
    """Counting, per request in arrival order, the leading blocks whose ids any earlier request carried (the
    ceiling any router and cache can approach; tokens: those blocks' tokens, at most the prompt)."""
    seen: set[int] = set()
    hit_blocks = all_blocks = hit_tokens = all_tokens = 0
    for r in sorted(requests, key=lambda q: (q.arrival_s, q.request_id)):
        hashes = r.block_hashes
        k = 0
        while k < len(hashes) and hashes[k] in seen:
            k += 1
        hit_blocks += k
        all_blocks += len(hashes)
        hit_tokens += min(k * r.hash_block_tokens, r.prompt_tokens)
        all_tokens += r.prompt_tokens
        seen.update(hashes)
    return IdealHitRate(hit_blocks / all_blocks if all_blocks else 0.0, hit_tokens / all_tokens if all_tokens else 0.0)
