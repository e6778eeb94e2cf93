"""Scheduler limits of a replica and the per-request state its engine keeps."""

from __future__ import annotations

from dataclasses import dataclass

from switchyard.accelerator.sim.prefix_cache import CachedBlock
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
    # Reuse KV blocks of earlier prompts by their hash chain (Request.block_hashes); on, the deployment uses the
    # block KV layout, whose calibrated overhead slows prefill a little (sim/prefix_calibration.py).
    prefix_caching: bool = True
    # A second KV tier in host memory per replica, in GiB (0: none): blocks the device cache evicts are kept there
    # and loaded back over the host link instead of recomputed (sim/host_tier.py). Needs prefix caching.
    host_kv_gib: float = 0.0


class SeqState:
    """Scheduler state of one request inside a replica (mutable, engine-private)."""

    __slots__ = (
        "block_pages",
        "blocks",
        "cacheable",
        "cached",
        "cached_blocks",
        "chip_us",
        "expected_cached",
        "first_token_s",
        "generated",
        "held",
        "kv",
        "loaded",
        "loading",
        "output_tokens",
        "preemptions",
        "recomputed",
        "req",
        "scheduled_s",
        "shared",
        "surcharge",
        "target",
    )

    def __init__(self, req: Request) -> None:
        self.req = req
        self.kv = 0  # tokens whose KV is in cache
        self.target = req.prompt_tokens  # tokens to prefill before the next token comes out
        self.generated = 0
        self.output_tokens = req.output_tokens  # the request's, kept here for the hot loops
        self.blocks = 0  # private KV blocks
        self.shared = 0  # KV pages of cached prefix blocks this sequence reads (`held`)
        self.held: list[CachedBlock] = []  # the leading hash blocks of its prompt, read from the prefix cache
        self.cacheable = 0  # full hash blocks of its prompt the replica may cache (0: no prefix caching)
        self.block_pages = 0  # KV pages per hash block
        self.surcharge = 0  # cached tokens whose residual cost the next prefill chunk pays
        self.loading = 0  # tokens loaded from the host tier whose transfer the next prefill chunk waits for
        self.loaded = 0  # the most tokens it loaded from the host tier at one admission (as `cached`)
        self.cached = 0
        self.cached_blocks = 0
        self.expected_cached = 0  # prompt tokens the prefix cache held for it when it arrived (the backlog's view)
        self.chip_us = 0
        self.first_token_s = -1.0
        self.scheduled_s = -1.0
        self.preemptions = 0
        self.recomputed = 0
