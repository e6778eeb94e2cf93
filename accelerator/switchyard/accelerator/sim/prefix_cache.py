"""Block-granular prefix cache of one replica: KV blocks of shared prompt prefixes, evicted LRU."""

from __future__ import annotations

from collections import OrderedDict

from switchyard.accelerator.sim.requests import Request

__all__ = ["PrefixCache", "PrefixEntry"]


class PrefixEntry:
    """Shared KV blocks of one prompt prefix; `ready` once its first owner has computed it."""

    __slots__ = ("blocks", "key", "owner", "ready", "refs", "tokens")

    def __init__(self, key: str, tokens: int, blocks: int, owner: object) -> None:
        self.key = key
        self.tokens = tokens
        self.blocks = blocks
        self.refs = 1
        self.ready = False
        self.owner: object | None = owner


class PrefixCache:
    """Entries keyed by `Request.prefix_id`. The engine owns the free-block count; methods return blocks freed."""

    def __init__(self, block_tokens: int) -> None:
        self.block_tokens = block_tokens
        self._entries: OrderedDict[str, PrefixEntry] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held_blocks(self) -> int:
        return sum(e.blocks for e in self._entries.values())

    @property
    def evictable_blocks(self) -> int:
        """Blocks that eviction could free now (entries nobody references)."""
        return sum(e.blocks for e in self._entries.values() if e.refs == 0)

    def lookup(self, req: Request) -> tuple[PrefixEntry | None, int]:
        """(ready entry the request can reuse, block-aligned length of its prefix)."""
        if req.prefix_id is None or req.prefix_tokens <= 0:
            return None, 0
        bt = self.block_tokens
        # Keep at least one prompt token to compute: the first output token comes out of a forward pass.
        aligned = min(req.prefix_tokens, req.prompt_tokens - 1) // bt * bt
        entry = self._entries.get(req.prefix_id)
        if entry is not None and entry.ready and 0 < entry.tokens <= aligned:
            return entry, aligned
        return None, aligned

    def acquire(self, entry: PrefixEntry) -> None:
        entry.refs += 1
        self._entries.move_to_end(entry.key)

    def create(self, key: str, tokens: int, owner: object) -> PrefixEntry | None:
        """A new entry computed by `owner`, unless one with this key already exists (then None)."""
        if key in self._entries or tokens <= 0:
            return None
        entry = PrefixEntry(key, tokens, tokens // self.block_tokens, owner)
        self._entries[key] = entry
        return entry

    def evict(self, shortfall: int, keep: PrefixEntry | None = None) -> int:
        """Drop unreferenced entries, least recently used first, until `shortfall` blocks are freed."""
        freed = 0
        for key in list(self._entries):
            if freed >= shortfall:
                break
            entry = self._entries[key]
            if entry.refs == 0 and entry is not keep:
                del self._entries[key]
                freed += entry.blocks
        return freed

    def release(self, entry: PrefixEntry, holder: object) -> int:
        """`holder` stops using `entry`; returns blocks freed (an owner leaving before computing it)."""
        entry.refs -= 1
        if entry.owner is holder:
            entry.owner = None
            if not entry.ready and entry.refs == 0:
                del self._entries[entry.key]
                return entry.blocks
        return 0
