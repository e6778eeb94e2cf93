"""One replica's serving engine: a pure, synchronous discrete-event core (vLLM-style scheduler).

Continuous batching at iteration level, a paged KV cache with admission control and recompute
preemption, chunked prefill under a token budget, a block-granular prefix cache with LRU eviction,
and multi-step decode jumps between events.
Time only moves when the caller asks (`step_until`), so the same core runs on a virtual clock offline
and can be driven by a wall clock later.
"""

from __future__ import annotations

import math

import numpy as np

from switchyard.accelerator.admission import WaitQueue
from switchyard.accelerator.attribution import attribute_chip_us
from switchyard.accelerator.deployment import Deployment
from switchyard.accelerator.prefix_cache import PrefixCache
from switchyard.accelerator.requests import FinishedRequest, Request
from switchyard.accelerator.sequence import EngineConfig, SeqState
from switchyard.accelerator.stepcost import StepCost

__all__ = ["EngineConfig", "ReplicaEngine"]


class ReplicaEngine:
    """Serve requests on one replica. Feed with submit(), advance with step_until(), drain with collect()."""

    def __init__(
        self,
        cost: StepCost,
        kv_capacity_tokens: int,
        config: EngineConfig,
        index: int = 0,
        deployment: Deployment | None = None,
    ) -> None:
        self.cost = cost
        self.config = config
        self.index = index
        self.deployment = deployment  # what this replica runs (metadata for fleets mixing hardware)
        # Seconds of work per outstanding token at a moderate batch: turns a token backlog into time, so
        # routers can compare replicas of different speeds.
        self.seconds_per_token = cost.iteration_s(0, 0.0, 0.0, [1024] * 8) / 8
        self.total_blocks = kv_capacity_tokens // config.block_tokens
        self.free_blocks = self.total_blocks
        self.now = 0.0
        self.busy_s = 0.0
        self.chip_us_total = 0
        self.iterations = 0
        self.batch_seconds = 0.0  # integral of running sequences over busy time (mean batch = this / busy_s)
        self._waiting = WaitQueue(config)
        self._running: list[SeqState] = []
        self._done: list[FinishedRequest] = []
        self.prefixes = PrefixCache(config.block_tokens)
        self.outstanding_tokens = 0  # prompt + output tokens not yet finished

    @property
    def idle(self) -> bool:
        return not self._running and not self._waiting

    @property
    def load_s(self) -> float:
        """Estimated seconds of work queued on this replica: the router's load signal."""
        return self.outstanding_tokens * self.seconds_per_token

    @property
    def prefill_backlog_tokens(self) -> int:
        """Prompt tokens still to compute on this replica (queued and running): what a new prompt waits on."""
        return sum(s.target - s.kv for s in self._waiting) + sum(
            s.target - s.kv for s in self._running if s.kv < s.target
        )

    @property
    def used_blocks(self) -> int:
        return self.total_blocks - self.free_blocks

    def check_invariants(self) -> None:
        """Raise AssertionError if KV block accounting is inconsistent (used by tests)."""
        held = sum(s.blocks for s in self._running) + self.prefixes.held_blocks
        assert 0 <= self.free_blocks <= self.total_blocks, (self.free_blocks, self.total_blocks)
        assert self.free_blocks + held == self.total_blocks, (self.free_blocks, held, self.total_blocks)
        for s in self._running:
            assert s.kv <= (s.blocks + s.shared) * self.config.block_tokens

    def submit(self, req: Request, first_token_s: float | None = None) -> None:
        """Queue a request; it is considered from the next iteration that starts at or after now.

        With `first_token_s`, the prompt's KV cache arrives ready (disaggregated serving: another pool ran
        the prefill and produced the first token then), so the request goes straight to decoding.
        """
        seq = SeqState(req)
        if first_token_s is not None:
            seq.kv = seq.target = req.prompt_tokens
            seq.generated = 1
            seq.first_token_s = first_token_s
        self._waiting.push(seq)
        self.outstanding_tokens += req.prompt_tokens + req.output_tokens

    def abort(self, request_id: int) -> bool:
        """Stop a request at once (its client went away): it leaves the batch or the queue, its KV blocks are
        freed, and it finishes (``cancelled``) with the tokens it got and the chip-µs it used so far."""
        seq = self._waiting.remove(request_id)
        if seq is None:
            seq = next((s for s in self._running if s.req.request_id == request_id), None)
            if seq is None:
                return False
            self._running.remove(seq)
        self.free_blocks += seq.blocks
        seq.blocks = 0
        self._release_prefix(seq)
        self._finish(seq, cancelled=True)
        return True

    def progress(self) -> dict[int, int]:
        """Output tokens generated so far by each running request (for streaming on a wall clock)."""
        return {s.req.request_id: s.generated for s in self._running}

    def collect(self) -> list[FinishedRequest]:
        """Requests finished since the last call, in finishing order."""
        done, self._done = self._done, []
        return done

    def step_until(self, t: float) -> None:
        """Run every iteration that starts before `t`; an idle replica's clock jumps to `t`."""
        while True:
            if self.idle:
                if math.isfinite(t):
                    self.now = max(self.now, t)
                return
            if self.now >= t:
                return
            self._admit()
            if not self._running:
                continue  # the head of the queue was rejected; look again
            if any(s.kv < s.target for s in self._running):
                self._prefill_iteration()
            else:
                self._decode_jump(t)

    # -- scheduling -------------------------------------------------------------------------------

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.config.block_tokens)

    def _admit(self) -> None:
        cfg = self.config
        while self._waiting and len(self._running) < cfg.max_batch:
            seq = self._waiting.peek()
            total = seq.req.prompt_tokens + seq.req.output_tokens
            if self._blocks_for(total) > self.total_blocks:
                self._waiting.pop()
                holds = self.total_blocks * cfg.block_tokens
                self._finish(seq, rejected=f"needs {total} KV tokens; replica holds {holds}")
                continue
            hit, aligned = self.prefixes.lookup(seq.req) if seq.kv == 0 else (None, 0)
            need = self._blocks_for(seq.target + 1) - (hit.blocks if hit else 0)
            if need > self.free_blocks:
                self.free_blocks += self.prefixes.evict(need - self.free_blocks, keep=hit)
                if need > self.free_blocks:
                    return
            self._waiting.pop()
            self.free_blocks -= need
            seq.blocks = need
            if hit is not None:
                self.prefixes.acquire(hit)
                seq.prefix, seq.shared, seq.kv = hit, hit.blocks, hit.tokens
                seq.cached = max(seq.cached, hit.tokens)
            elif aligned and (entry := self.prefixes.create(str(seq.req.prefix_id), aligned, seq)) is not None:
                # First sight of this prefix: its blocks become a shared entry, ready once computed.
                seq.blocks -= entry.blocks
                seq.prefix, seq.shared = entry, entry.blocks
            if seq.scheduled_s < 0:
                seq.scheduled_s = self.now
            self._running.append(seq)

    def _release_prefix(self, seq: SeqState) -> None:
        if seq.prefix is not None:
            self.free_blocks += self.prefixes.release(seq.prefix, seq)
            seq.prefix, seq.shared = None, 0

    def _preempt_newest(self) -> None:
        """Recompute preemption: the latest admitted sequence gives back its KV and waits at the front."""
        seq = self._running.pop()
        self.free_blocks += seq.blocks
        self._release_prefix(seq)
        seq.recomputed += seq.kv
        seq.blocks, seq.kv = 0, 0
        seq.target = seq.req.prompt_tokens + seq.generated
        seq.preemptions += 1
        self._waiting.push_front(seq)

    def _account(self, duration_s: float, seqs: list[SeqState], work: list[int]) -> None:
        chips = self.cost.chips
        self.busy_s += duration_s
        self.batch_seconds += duration_s * len(seqs)
        self.now += duration_s
        total = round(self.busy_s * 1e6 * chips)
        parts = attribute_chip_us(total - self.chip_us_total, work)
        self.chip_us_total = total
        for seq, part in zip(seqs, parts, strict=True):
            seq.chip_us += part

    def _prefill_iteration(self) -> None:
        budget = self.config.max_batched_tokens
        decoders = [s for s in self._running if s.kv >= s.target]
        self._grow_for_decode(decoders, 1)
        decoders = [s for s in self._running if s.kv >= s.target]
        budget -= len(decoders)
        static = self.cost.static
        chunks: list[tuple[SeqState, int]] = []
        qk = kv_read = 0.0
        tokens = 0
        for s in self._running:
            if s.kv < s.target and budget > 0:
                n = min(s.target - s.kv, budget)
                budget -= n
                tokens += n
                qk += n * (s.kv + n) if static else n * (s.kv + n / 2)
                kv_read += s.kv
                chunks.append((s, n))
        duration = self.cost.iteration_s(tokens, qk, kv_read, [s.kv + 1 for s in decoders], len(chunks))
        seqs = [s for s, _ in chunks] + decoders
        self._account(duration, seqs, [n for _, n in chunks] + [1] * len(decoders))
        self.iterations += 1
        for s, n in chunks:
            s.kv += n
            p = s.prefix
            if p is not None and not p.ready and p.owner is s and s.kv >= p.tokens:
                p.ready = True
            if s.kv >= s.target:
                self._emit(s, 1)
        for s in decoders:
            s.kv += 1
            self._emit(s, 1)
        self._retire()

    def _grow_for_decode(self, seqs: list[SeqState], steps: int) -> None:
        """Give every decoding sequence blocks for `steps` more tokens, preempting if memory runs out."""
        needs = [self._blocks_for(s.kv + steps) - s.blocks - s.shared for s in seqs]
        total = sum(n for n in needs if n > 0)
        if total > self.free_blocks:  # cached prefixes nobody uses go before running work does
            self.free_blocks += self.prefixes.evict(total - self.free_blocks)
        if total <= self.free_blocks:
            for s, n in zip(seqs, needs, strict=True):
                if n > 0:
                    s.blocks += n
                    self.free_blocks -= n
            return
        for s in seqs:
            if s not in self._running:
                continue
            need = self._blocks_for(s.kv + steps) - s.blocks - s.shared
            while need > self.free_blocks and self._running[-1] is not s:
                self._preempt_newest()
            if need > self.free_blocks:
                self._preempt_newest()  # s itself is the newest: it waits for memory
                continue
            if need > 0:
                self.free_blocks -= need
                s.blocks += need

    def _decode_jump(self, horizon: float) -> None:
        seqs = self._running
        k = min(self.config.max_jump_steps, min(s.req.output_tokens - s.generated for s in seqs))
        spare = self.free_blocks + self.prefixes.evictable_blocks
        while k > 1 and sum(max(0, self._blocks_for(s.kv + k) - s.blocks - s.shared) for s in seqs) > spare:
            k //= 2
        self._grow_for_decode(list(seqs), k)
        seqs = self._running
        if not seqs:
            return
        k = min(k, min(s.req.output_tokens - s.generated for s in seqs))
        cum = self.cost.decode_jump_s([s.kv + 1 for s in seqs], k)
        if math.isfinite(horizon):
            n = int(np.searchsorted(cum[:-1], horizon - self.now, side="left")) + 1
            k = min(k, n)
        self._account(float(cum[k - 1]), list(seqs), [k] * len(seqs))
        self.iterations += k
        for s in seqs:
            s.kv += k
        for s in seqs:
            self._emit(s, k)
        self._retire()

    def _emit(self, seq: SeqState, tokens: int) -> None:
        if seq.first_token_s < 0:
            seq.first_token_s = self.now
        seq.generated += tokens
        seq.target = max(seq.target, seq.kv)

    def _retire(self) -> None:
        keep = []
        for s in self._running:
            if s.generated >= s.req.output_tokens:
                self.free_blocks += s.blocks
                s.blocks = 0
                self._release_prefix(s)
                self._finish(s)
            else:
                keep.append(s)
        self._running = keep

    def _finish(self, seq: SeqState, rejected: str | None = None, cancelled: bool = False) -> None:
        r = seq.req
        self.outstanding_tokens -= r.prompt_tokens + r.output_tokens
        at = self.now
        self._done.append(
            FinishedRequest(
                request_id=r.request_id,
                replica=self.index,
                arrival_s=r.arrival_s,
                scheduled_s=seq.scheduled_s if seq.scheduled_s >= 0 else at,
                first_token_s=seq.first_token_s if seq.first_token_s >= 0 else at,
                finish_s=at,
                prompt_tokens=r.prompt_tokens,
                output_tokens=seq.generated,
                chip_us=seq.chip_us,
                preemptions=seq.preemptions,
                recomputed_tokens=seq.recomputed,
                rejected=rejected,
                cached_tokens=seq.cached,
                cancelled=cancelled,
            )
        )
