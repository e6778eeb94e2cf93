"""Scheduler limits of a replica and the per-request state its engine keeps."""

from __future__ import annotations

from dataclasses import dataclass

from switchyard.accelerator.sim.prefix_cache import PrefixEntry
from switchyard.accelerator.sim.requests import Request

__all__ = ["EngineConfig", "SeqState"]


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Scheduler limits of one replica."""

    block_tokens: int = 32  # KV-cache page size
    max_batch: int = 64  # sequences running at once (max_num_seqs)
    max_batched_tokens: int = 2048  # token budget of one iteration (chunked prefill)
    max_jump_steps: int = 1024  # decode iterations simulated in one vectorised jump
    fair_share: bool = False  # admit by priority tier, then weighted fair share across tenants (else FCFS)
    tenant_weights: tuple[tuple[str, float], ...] = ()  # fair-share weights (default 1 per tenant)


class SeqState:
    """Scheduler state of one request inside a replica (mutable, engine-private)."""

    __slots__ = (
        "blocks",
        "cached",
        "chip_us",
        "first_token_s",
        "generated",
        "kv",
        "output_tokens",
        "preemptions",
        "prefix",
        "recomputed",
        "req",
        "scheduled_s",
        "shared",
        "target",
    )

    def __init__(self, req: Request) -> None:
        self.req = req
        self.kv = 0  # tokens whose KV is in cache
        self.target = req.prompt_tokens  # tokens to prefill before the next token comes out
        self.generated = 0
        self.output_tokens = req.output_tokens  # the request's, kept here for the hot loops
        self.blocks = 0  # private KV blocks
        self.shared = 0  # blocks of a cached prefix this sequence reads
        self.prefix: PrefixEntry | None = None
        self.cached = 0
        self.chip_us = 0
        self.first_token_s = -1.0
        self.scheduled_s = -1.0
        self.preemptions = 0
        self.recomputed = 0
