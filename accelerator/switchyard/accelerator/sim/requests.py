"""What the engine consumes (Request) and what it reports for each request (FinishedRequest)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FinishedRequest", "Request"]


@dataclass(frozen=True, slots=True)
class Request:
    """One inference request arriving at `arrival_s` (simulated seconds)."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    session: str | None = None
    tenant: str | None = None
    # Hash-chain ids of the prompt's leading blocks of `hash_block_tokens` tokens: a block's id depends on every
    # token before it, so equal ids mean a KV prefix a replica's prefix cache can reuse (Mooncake's `hash_ids`).
    block_hashes: tuple[int, ...] = ()
    hash_block_tokens: int = 32  # tokens per hashed block (Mooncake traces: 512)
    priority: int = 1  # tier: higher is admitted first when the replica is full (EngineConfig.fair_share)


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """Per-request outcome: timings in simulated seconds, attributed compute in chip-microseconds."""

    request_id: int
    replica: int
    arrival_s: float
    scheduled_s: float
    first_token_s: float
    finish_s: float
    prompt_tokens: int
    output_tokens: int
    chip_us: int
    preemptions: int = 0
    recomputed_tokens: int = 0
    rejected: str | None = None  # why the request could never run (e.g. longer than the KV cache)
    cached_tokens: int = 0  # prompt tokens served from the prefix cache instead of being computed
    cached_blocks: int = 0  # leading `Request.block_hashes` blocks found in the replica's prefix cache
    # Chip-µs the cached tokens did not cost: computing them at the replica's linear prefill rate, less reading
    # (and loading from the host tier) them. An estimate that leaves out attention, so it errs low, beside the
    # exact `chip_us` the request did cost.
    cache_saved_chip_us: int = 0
    cancelled: bool = False  # stopped by abort(): output_tokens and chip_us are what it got and used so far

    @property
    def queue_s(self) -> float:
        return self.scheduled_s - self.arrival_s

    @property
    def ttft_ms(self) -> float:
        return (self.first_token_s - self.arrival_s) * 1e3

    @property
    def tpot_ms(self) -> float:
        """Mean time per output token after the first (0 for single-token outputs)."""
        if self.output_tokens <= 1:
            return 0.0
        return (self.finish_s - self.first_token_s) * 1e3 / (self.output_tokens - 1)

    @property
    def e2e_ms(self) -> float:
        return (self.finish_s - self.arrival_s) * 1e3
