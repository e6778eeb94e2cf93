"""Prefix cache of one replica: KV blocks keyed by their hash chain, pinned while in use, evicted LRU when not.

The block manager of vLLM (and NxD Inference's paged KV layout): a block computed for one request is registered
under its hash-chain id once full, any later request whose prompt starts with the same ids reads it instead of
computing it, blocks that running requests read are pinned, and blocks nobody reads stay cached until memory is
needed, least recently used first (handed to a lower tier if the replica has one). The engine owns the free-page
count; `insert` takes pages the caller gives up and `evict` returns how many it freed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

__all__ = ["CachedBlock", "PrefixCache"]


class CachedBlock:
    """One hash block in the cache: `pages` KV pages, read by `refs` running sequences."""

    __slots__ = ("key", "pages", "refs")

    def __init__(self, key: int, pages: int) -> None:
        self.key = key
        self.pages = pages
        self.refs = 1


class PrefixCache:
    """Cached blocks by hash id; those with no reader are kept in least-recently-used order for eviction."""

    def __init__(self, demote: Callable[[int, int], None] | None = None) -> None:
        self._demote = demote  # called with (hash id, pages) for each evicted block: a lower tier may keep it
        self._blocks: dict[int, CachedBlock] = {}
        self._unused: OrderedDict[int, CachedBlock] = OrderedDict()  # refs == 0, least recently used first
        self.held_pages = 0  # pages of every cached block, pinned or not
        self.evictable_pages = 0  # pages eviction could free now (blocks no running sequence reads)

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, key: int) -> bool:
        return key in self._blocks

    def match(self, hashes: Sequence[int], limit: int) -> list[CachedBlock]:
        """The cached blocks of the leading run of `hashes` (at most `limit`): what a new request can reuse."""
        blocks = self._blocks
        out: list[CachedBlock] = []
        for key in hashes[:limit]:
            block = blocks.get(key)
            if block is None:
                break
            out.append(block)
        return out

    def get(self, key: int) -> CachedBlock | None:
        return self._blocks.get(key)

    def acquire(self, blocks: Sequence[CachedBlock]) -> None:
        """Pin `blocks` for a sequence that reads them."""
        unused = self._unused
        for b in blocks:
            if b.refs == 0:
                del unused[b.key]
                self.evictable_pages -= b.pages
            b.refs += 1

    def release(self, blocks: Sequence[CachedBlock]) -> None:
        """A sequence stops reading `blocks`; unread ones become evictable, a chain's tail before its head
        (as vLLM frees them), since a tail without its head can never be matched."""
        unused = self._unused
        for b in reversed(blocks):
            b.refs -= 1
            if b.refs == 0:
                unused[b.key] = b
                self.evictable_pages += b.pages

    def insert(self, key: int, pages: int) -> CachedBlock:
        """Register a block a sequence has just computed (it stays pinned by that sequence)."""
        block = CachedBlock(key, pages)
        self._blocks[key] = block
        self.held_pages += pages
        return block

    def evict(self, shortfall: int) -> int:
        """Drop unread blocks, least recently used first, until `shortfall` pages are freed; returns pages freed."""
        freed = 0
        unused, blocks, demote = self._unused, self._blocks, self._demote
        while freed < shortfall and unused:
            key, block = unused.popitem(last=False)
            del blocks[key]
            freed += block.pages
            if demote is not None:
                demote(key, block.pages)
        self.held_pages -= freed
        self.evictable_pages -= freed
        return freed
