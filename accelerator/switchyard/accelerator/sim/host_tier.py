"""A replica's second KV tier in host memory: blocks the device cache evicts, kept for a later load.

Serving systems that win on long multi-turn traffic keep more KV than the accelerators hold: Mooncake's
KVCache-centric store pools the hosts' DRAM, NVIDIA Dynamo's KV block manager and LMCache offload evicted blocks to
CPU memory, and vLLM's KV-offloading connector does the same. A block the device's prefix cache evicts is copied
to this tier (the copy overlaps compute, so it is free here); a later request whose prompt continues past the
device's cached blocks with blocks held here loads them over the host link instead of recomputing them, paying
`load_s_per_token` per token on the prefill that needs them. The tier is least recently used under its capacity.

Replicas on one instance share its host memory, so they share one tier (`pooled`): a block any of them evicted
can be loaded by any other, as Mooncake's pool serves every prefill node.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["HOST_LINK_BYTES_PER_S_PER_CHIP", "HostTier", "pooled"]

HOST_LINK_BYTES_PER_S_PER_CHIP = 32e9
"""Host-to-device bandwidth per chip for KV loads (estimate: half of a PCIe Gen5 x16 link's 64 GB/s, for DMA
descriptors and contention; AWS publishes no host-link figure for Trainium2)."""


class HostTier:
    """Block hashes held in host memory (with their tokens), least recently used first, up to `capacity_tokens`."""

    __slots__ = ("_blocks", "capacity_tokens", "held_tokens", "load_s_per_token")

    def __init__(self, capacity_tokens: int, load_s_per_token: float) -> None:
        self.capacity_tokens = capacity_tokens
        self.load_s_per_token = load_s_per_token
        self.held_tokens = 0
        self._blocks: OrderedDict[int, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, key: int) -> bool:
        return key in self._blocks

    def keep(self, key: int, tokens: int) -> None:
        """Hold a block of `tokens` tokens the device cache evicted (the most recently used one here)."""
        blocks = self._blocks
        if key in blocks:
            blocks.move_to_end(key)
            return
        blocks[key] = tokens
        self.held_tokens += tokens
        while self.held_tokens > self.capacity_tokens and blocks:
            self.held_tokens -= blocks.popitem(last=False)[1]

    def run(self, hashes: Sequence[int], start: int, limit: int, *, read: bool = True) -> int:
        """How many of `hashes[start:limit]` this tier holds in a leading run; when `read`, they become the most
        recently used."""
        blocks = self._blocks
        end = start
        while end < limit and hashes[end] in blocks:
            if read:
                blocks.move_to_end(hashes[end])
            end += 1
        return end - start


def pooled(
    gib_per_replica: float, kv_bytes_per_token: float, chips: int, replicas: int, per_instance: int
) -> list[HostTier | None]:
    """The host tier of each of `replicas` replicas of `chips` chips: one per instance, holding
    `gib_per_replica` GiB for each of the (at most `per_instance`) replicas placed on it; none when the size is 0."""
    if gib_per_replica <= 0:
        return [None] * replicas
    load_s = kv_bytes_per_token / (HOST_LINK_BYTES_PER_S_PER_CHIP * chips)
    tiers: list[HostTier | None] = []
    for first in range(0, replicas, per_instance):
        on_instance = min(per_instance, replicas - first)
        tier = HostTier(int(gib_per_replica * on_instance * 2**30 // kv_bytes_per_token), load_s)
        tiers += [tier] * on_instance
    return tiers
