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
    prefix_id: str | None = None  # names a leading span shared with other requests (an agent's system prompt)
    prefix_tokens: int = 0  # length of that shared span; reused from the replica's prefix cache when present
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
