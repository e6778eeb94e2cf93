"""One replica's serving engine: a pure, synchronous discrete-event core (vLLM-style scheduler).

Continuous batching at iteration level, a paged KV cache with admission control and recompute
preemption, chunked prefill under a token budget, a prefix cache of hash-chained KV blocks (pinned while read,
evicted LRU), and multi-step decode jumps between events.
Time only moves when the caller asks (`step_until`), so the same core runs on a virtual clock offline
and can be driven by a wall clock later.
"""

from __future__ import annotations

import math
from bisect import bisect_left

from switchyard.accelerator.sim.attribution import attribute_chunks_and_decodes
from switchyard.accelerator.sim.costmodel import FloatArray
from switchyard.accelerator.sim.deployment import Deployment
from switchyard.accelerator.sim.host_tier import HostTier, pooled
from switchyard.accelerator.sim.prefix_cache import CachedBlock, PrefixCache
from switchyard.accelerator.sim.prefix_calibration import prefix_caching_cost
from switchyard.accelerator.sim.requests import FinishedRequest, Request
from switchyard.accelerator.sim.sequence import EngineConfig, SeqState
from switchyard.accelerator.sim.stepcost import StepCost
from switchyard.accelerator.sim.wait_queue import WaitQueue

__all__ = ["EngineConfig", "ReplicaEngine"]


def _causal_band(cached: int, n: int, window: int) -> float:
    """Keys `n` new queries after `cached` tokens attend to in a sliding-window layer, summed (causal)."""
    full = n * (cached + n / 2)
    if cached + n <= window:
        return full
    # queries at positions cached+1 .. cached+n each see min(position, window) keys
    inside = max(0, min(n, window - cached))
    return inside * (cached + inside / 2) + (n - inside) * window


class ReplicaEngine:
    """Serve requests on one replica. Feed with submit(), advance with step_until(), drain with collect()."""

    def __init__(
        self,
        cost: StepCost,
        kv_capacity_tokens: int,
        config: EngineConfig,
        index: int = 0,
        deployment: Deployment | None = None,
        host: HostTier | None = None,
    ) -> None:
        self.cost = cost
        self.config = config
        self.index = index
        self.deployment = deployment  # what this replica runs (metadata for fleets mixing hardware)
        # Seconds of work per outstanding token at a moderate batch: turns a token backlog into time, so
        # routers can compare replicas of different speeds.
        self.seconds_per_token = cost.iteration_s(0, 0.0, 0.0, [1024] * 8) / 8
        # Linear-attention state: a slot for each sequence the replica may run, reserved up front as the Trainium ports
        # size their state buffers by the batch (aws-samples' request-stable state slots), in KV-cache tokens.
        reserved = math.ceil(config.max_batch * cost.state_bytes_per_sequence / cost.kv_bytes_per_token)
        self.total_blocks = max(kv_capacity_tokens - reserved, 0) // config.block_tokens
        self.free_blocks = self.total_blocks
        self.now = 0.0
        self.busy_s = 0.0
        self.chip_us_total = 0
        self.iterations = 0
        self.batch_seconds = 0.0  # integral of running sequences over busy time (mean batch = this / busy_s)
        self._waiting = WaitQueue(config)
        self._running: list[SeqState] = []
        self._done: list[FinishedRequest] = []
        # The KV tier in host memory (`config.host_kv_gib`), shared with the replicas of the same instance when
        # the caller passes their common one.
        if host is None and config.prefix_caching:
            host = pooled(config.host_kv_gib, cost.kv_bytes_per_token, cost.chips, 1, 1)[0]
        self.host = host if config.prefix_caching else None
        if self.host is not None:
            keep, bt = self.host.keep, config.block_tokens
            self.prefixes = PrefixCache(lambda key, pages: keep(key, pages * bt))
        else:
            self.prefixes = PrefixCache()
        # With prefix caching the KV cache uses the block layout: iterations prefilling a request that carries block
        # hashes take a calibrated factor longer, and each cached token a prefill reads costs a calibrated share of
        # a computed token. Requests without hashes run as on a deployment without the layout (so workloads that
        # never share a prefix keep the calibration of the plain stacks).
        caching = prefix_caching_cost()
        self._prefill_scale = caching.block_layout_overhead if config.prefix_caching else 1.0
        self._cached_token_s = caching.cached_token_share * cost.prefill_s_per_token
        self.outstanding_tokens = 0  # prompt + output tokens not yet finished
        self._prefilling = 0  # running sequences with prompt tokens still to compute
        self._plan: _DecodePlan | None = None  # the decode-only stretch in flight, if any

    @property
    def idle(self) -> bool:
        return not self._running and not self._waiting

    @property
    def load_s(self) -> float:
        """Estimated seconds of work queued on this replica: the router's load signal."""
        return self.outstanding_tokens * self.seconds_per_token

    @property
    def prefill_backlog_tokens(self) -> int:
        """Prompt tokens still to compute on this replica (queued and running): what a new prompt waits on.

        A queued request counts without the prefix the cache held for it when it arrived."""
        return sum(s.target - max(s.kv, s.expected_cached) for s in self._waiting) + sum(
            s.target - s.kv for s in self._running if s.kv < s.target
        )

    @property
    def cache_capacity_tokens(self) -> int:
        """Tokens of KV this replica can keep for reuse: its device cache and its host tier (shared with the
        replicas of its instance)."""
        return self.total_blocks * self.config.block_tokens + (self.host.capacity_tokens if self.host else 0)

    @property
    def used_blocks(self) -> int:
        return self.total_blocks - self.free_blocks

    @property
    def queued(self) -> int:
        """Requests waiting on this replica for a place in the batch (the fleet view's queue depth)."""
        return len(self._waiting)

    @property
    def running(self) -> int:
        """Requests in this replica's batch now."""
        return len(self._running)

    def check_invariants(self) -> None:
        """Raise AssertionError if KV block accounting is inconsistent (used by tests)."""
        self._settle_plan()
        assert self._prefilling == sum(1 for s in self._running if s.kv < s.target)
        held = sum(s.blocks for s in self._running) + self.prefixes.held_pages
        assert 0 <= self.free_blocks <= self.total_blocks, (self.free_blocks, self.total_blocks)
        assert self.free_blocks + held == self.total_blocks, (self.free_blocks, held, self.total_blocks)
        for s in self._running:
            assert s.kv <= (s.blocks + s.shared) * self.config.block_tokens
            assert s.shared == len(s.held) * s.block_pages

    def submit(self, req: Request, first_token_s: float | None = None) -> None:
        """Queue a request; it is considered from the next iteration that starts at or after now.

        With `first_token_s`, the prompt's KV cache arrives ready (disaggregated serving: another pool ran
        the prefill and produced the first token then), so the request goes straight to decoding.
        """
        self._settle_plan()  # the next iteration considers this request: the stretch in flight ends here
        seq = SeqState(req)
        bt, hb = self.config.block_tokens, req.hash_block_tokens
        if self.config.prefix_caching and req.block_hashes and hb > 0 and hb % bt == 0:
            seq.block_pages = hb // bt
            seq.cacheable = min(len(req.block_hashes), req.prompt_tokens // hb)
            hits = len(self._lookup(seq))
            seq.expected_cached = (hits + self._host_run(seq, hits, read=False)) * hb
        if first_token_s is not None:
            seq.kv = seq.target = req.prompt_tokens
            seq.generated = 1
            seq.first_token_s = first_token_s
        self._waiting.push(seq)
        self.outstanding_tokens += req.prompt_tokens + req.output_tokens

    def abort(self, request_id: int) -> bool:
        """Stop a request at once (its client went away): it leaves the batch or the queue, its KV blocks are
        freed, and it finishes (``cancelled``) with the tokens it got and the chip-µs it used so far."""
        self._settle_plan()
        seq = self._waiting.remove(request_id)
        if seq is None:
            seq = next((s for s in self._running if s.req.request_id == request_id), None)
            if seq is None:
                return False
            self._running.remove(seq)
            if seq.kv < seq.target:
                self._prefilling -= 1
        self.free_blocks += seq.blocks
        seq.blocks = 0
        self._release_prefix(seq)
        self._finish(seq, cancelled=True)
        return True

    def progress(self) -> dict[int, int]:
        """Output tokens generated so far by each running request (for streaming on a wall clock)."""
        self._settle_plan()
        return {s.req.request_id: s.generated for s in self._running}

    def collect(self) -> list[FinishedRequest]:
        """Requests finished since the last call, in finishing order."""
        done, self._done = self._done, []
        return done

    def step_until(self, t: float) -> None:
        """Run every iteration that starts before `t`; an idle replica's clock jumps to `t`."""
        while True:
            if self._plan is not None:
                if not self._advance_plan(t):
                    return
                continue
            if self.idle:
                if math.isfinite(t):
                    self.now = max(self.now, t)
                return
            if self.now >= t:
                return
            if self._waiting:
                self._admit()
            if not self._running:
                continue  # the head of the queue was rejected; look again
            if self._prefilling:
                self._prefill_iteration()
            else:
                self._plan_decode()

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
            hits = self._lookup(seq) if seq.kv == 0 and seq.cacheable else []
            need = self._blocks_for(seq.target + 1) - len(hits) * seq.block_pages
            if hits:
                self.prefixes.acquire(hits)  # pinned first: eviction must not take what this request reads
            if need > self.free_blocks:
                self.free_blocks += self.prefixes.evict(need - self.free_blocks)
                if need > self.free_blocks:
                    self.prefixes.release(hits)
                    return
            self._waiting.pop()
            self.free_blocks -= need
            seq.blocks = need
            loaded = self._host_run(seq, len(hits)) if seq.kv == 0 and seq.cacheable else 0
            if hits:
                seq.held, seq.shared = hits, len(hits) * seq.block_pages
            if hits or loaded:
                hb = seq.req.hash_block_tokens
                reused = (len(hits) + loaded) * hb
                seq.kv = seq.surcharge = reused
                seq.loading = loaded * hb  # its pages are among `need`; registered once the chunk runs
                seq.loaded = max(seq.loaded, seq.loading)
                seq.cached = max(seq.cached, reused)
                seq.cached_blocks = max(seq.cached_blocks, len(hits) + loaded)
            if seq.scheduled_s < 0:
                seq.scheduled_s = self.now
            if seq.kv < seq.target:
                self._prefilling += 1
            self._running.append(seq)

    @staticmethod
    def _reusable(seq: SeqState) -> int:
        """How many leading hash blocks of the prompt a cache may serve: at least one token is left to compute
        (the first output token comes out of a forward pass)."""
        return min((seq.target - 1) // seq.req.hash_block_tokens, seq.cacheable)

    def _lookup(self, seq: SeqState) -> list[CachedBlock]:
        """The device-cached leading blocks of the prompt."""
        return self.prefixes.match(seq.req.block_hashes, self._reusable(seq))

    def _saved_chip_us(self, seq: SeqState) -> int:
        """What computing the request's cached tokens would have cost beyond reading (and loading) them."""
        if not seq.cached:
            return 0
        computed_s = self.cost.prefill_s_per_token * self._prefill_scale
        saved_s = seq.cached * (computed_s - self._cached_token_s)
        if self.host is not None:
            saved_s -= seq.loaded * self.host.load_s_per_token
        return max(0, round(saved_s * 1e6 * self.cost.chips))

    def _host_run(self, seq: SeqState, start: int, *, read: bool = True) -> int:
        """Blocks of the prompt after its `start` device-cached ones that the host tier holds."""
        if self.host is None:
            return 0
        return self.host.run(seq.req.block_hashes, start, self._reusable(seq), read=read)

    def _register(self, seq: SeqState) -> None:
        """Hand the prompt's newly computed full hash blocks to the prefix cache (vLLM caches each block as
        soon as it is full). A block another sequence cached meanwhile is shared and this copy freed."""
        full = min(seq.cacheable, seq.kv // seq.req.hash_block_tokens)
        held, hashes, pages, cache = seq.held, seq.req.block_hashes, seq.block_pages, self.prefixes
        while len(held) < full:
            key = hashes[len(held)]
            block = cache.get(key)
            if block is None:
                block = cache.insert(key, pages)
            else:
                cache.acquire((block,))
                self.free_blocks += pages
            seq.blocks -= pages
            seq.shared += pages
            held.append(block)

    def _release_prefix(self, seq: SeqState) -> None:
        if seq.held:
            self.prefixes.release(seq.held)
            seq.held, seq.shared = [], 0

    def _preempt_newest(self) -> None:
        """Recompute preemption: the latest admitted sequence gives back its KV and waits at the front."""
        seq = self._running.pop()
        if seq.kv < seq.target:
            self._prefilling -= 1
        self.free_blocks += seq.blocks
        self._release_prefix(seq)
        seq.recomputed += seq.kv
        seq.blocks, seq.kv = 0, 0
        seq.target = seq.req.prompt_tokens + seq.generated
        seq.preemptions += 1
        self._waiting.push_front(seq)

    def _account(self, duration_s: float, sequences: int) -> int:
        """Charge one span of busy time; returns its chip-µs (running total, so the parts add up exactly)."""
        self.busy_s += duration_s
        self.batch_seconds += duration_s * sequences
        self.now += duration_s
        total = round(self.busy_s * 1e6 * self.cost.chips)
        part = total - self.chip_us_total
        self.chip_us_total = total
        return part

    def _prefill_iteration(self) -> None:
        bt = self.config.block_tokens
        running = self._running
        budget = self.config.max_batched_tokens - (len(running) - self._prefilling)  # a token per decoder first
        static = self.cost.static
        chunks: list[tuple[SeqState, int]] = []
        decoders: list[SeqState] = []
        short: list[SeqState] = []  # decoders whose next token starts a KV block
        ctx: list[int] = []
        qk = kv_read = 0.0
        window = self.cost.window  # sliding-window layers: the chunks' keys cut to the window
        wqk = wkv = 0.0
        tokens = surcharge = loading = 0
        layout = False
        add_decoder, add_ctx = decoders.append, ctx.append
        for s in running:
            kv = s.kv
            left = s.target - kv
            if left > 0:
                if budget > 0:
                    n = left if left < budget else budget
                    budget -= n
                    tokens += n
                    qk += n * (kv + n) if static else n * (kv + n / 2)
                    kv_read += kv
                    if window:
                        wqk += n * min(kv + n, window) if static else _causal_band(kv, n, window)
                        wkv += min(kv, window)
                    surcharge += s.surcharge
                    loading += s.loading
                    s.surcharge = s.loading = 0
                    layout = layout or s.block_pages > 0
                    chunks.append((s, n))
            else:
                add_decoder(s)
                add_ctx(kv + 1)
                if kv >= (s.blocks + s.shared) * bt:
                    short.append(s)
        if short:
            if len(short) > self.free_blocks:
                # Memory is short: evict cached prefixes or preempt (the general path), then look again.
                self._grow_for_decode(decoders, 1)
                if self._running:
                    self._prefill_iteration()
                return
            self.free_blocks -= len(short)
            for s in short:
                s.blocks += 1
        if window:
            duration = self.cost.iteration_s(tokens, qk, kv_read, ctx, len(chunks), wqk, wkv)
        else:
            duration = self.cost.iteration_s(tokens, qk, kv_read, ctx, len(chunks))
        if layout:
            duration *= self._prefill_scale
        if surcharge:
            duration += surcharge * self._cached_token_s
        if loading:
            assert self.host is not None
            duration += loading * self.host.load_s_per_token  # the chunk waits for its KV to arrive
        part = self._account(duration, len(chunks) + len(decoders))
        self.iterations += 1
        # Exact split by tokens (attribute_chip_us's largest-remainder rule, computed per chunk, not per decode).
        parts, one, extra = attribute_chunks_and_decodes(part, [n for _, n in chunks], len(decoders))
        for s in decoders[:extra]:
            s.chip_us += 1
        finished = False
        now = self.now
        for (s, n), share in zip(chunks, parts, strict=True):
            s.chip_us += share
            s.kv += n
            if s.cacheable > len(s.held):
                self._register(s)
            if s.kv >= s.target:
                self._prefilling -= 1
                if s.first_token_s < 0:
                    s.first_token_s = now
                s.generated += 1
                if s.generated >= s.output_tokens:
                    finished = True
        for s in decoders:
            s.chip_us += one
            s.kv += 1
            s.generated += 1
            if s.generated >= s.output_tokens:
                finished = True
        if finished:
            self._retire()

    def _grow_for_decode(self, seqs: list[SeqState], steps: int) -> None:
        """Give every decoding sequence blocks for `steps` more tokens, preempting if memory runs out."""
        bt = self.config.block_tokens
        needs = [-(-(s.kv + steps) // bt) - s.blocks - s.shared for s in seqs]
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

    def _plan_decode(self) -> None:
        """Start a stretch of decode-only iterations that ends at the next finish (or the jump limit, or the
        last KV block boundary memory allows): nothing inside it changes the batch unless a request arrives
        or is aborted on this replica, which settles the stretch where it is (see _settle_plan)."""
        seqs = self._running
        bt = self.config.block_tokens
        k = self.config.max_jump_steps
        for s in seqs:
            left = s.output_tokens - s.generated
            if left < k:
                k = left
        # The stretch stops before the KV block boundary that free memory cannot serve: crossing it evicts cached
        # prefixes or preempts, which a single step does (k == 1) exactly as it would anywhere else.
        free = self.free_blocks
        while True:
            need = 0
            for s in seqs:
                n = -(-(s.kv + k) // bt) - s.blocks - s.shared
                if n > 0:
                    need += n
            if need <= free or k == 1:
                break
            k //= 2
        blocks_before: list[int] | None = None  # None: the stretch took no blocks (nothing to give back)
        if need:
            blocks_before = [s.blocks for s in seqs]
            count = len(seqs)
            self._grow_for_decode(list(seqs), k)
            seqs = self._running
            if not seqs:
                return
            if len(seqs) != count:  # preempted (only ever at k == 1): the step runs with what is left
                blocks_before = None
        cum = self.cost.decode_jump_s([s.kv + 1 for s in seqs], k)
        self._plan = _DecodePlan(list(seqs), blocks_before, cum, self.now)

    def _advance_plan(self, t: float) -> bool:
        """Run the stretch's iterations that start before `t`; True once it is complete (and settled)."""
        plan = self._plan
        assert plan is not None
        cum = plan.cum
        k = len(cum)
        # a few lookups into the array: most stretches end long before their last planned step
        n = k if t == math.inf else bisect_left(cum, t - plan.start_s, 0, k - 1) + 1
        if n > plan.applied:
            end = float(cum[n - 1])
            span = end - (float(cum[plan.applied - 1]) if plan.applied else 0.0)
            self.busy_s += span
            self.batch_seconds += span * len(plan.seqs)
            self.now = plan.start_s + end
            total = round(self.busy_s * 1e6 * self.cost.chips)
            plan.chip_us += total - self.chip_us_total
            self.chip_us_total = total
            self.iterations += n - plan.applied
            plan.applied = n
        if n < k:
            return False
        self._settle_plan()
        self._retire()
        return True

    def _settle_plan(self) -> None:
        """Write the stretch's iterations run so far into its sequences (equal shares of its chip-µs, the leftover
        units to the first ones) and drop the rest of it; the next step plans again from there."""
        plan = self._plan
        if plan is None:
            return
        self._plan = None
        steps = plan.applied
        seqs = plan.seqs
        q, r = divmod(plan.chip_us, len(seqs))
        for s in seqs[:r]:
            s.chip_us += 1
        for s in seqs:
            s.kv += steps
            s.generated += steps
            s.chip_us += q
        before = plan.blocks_before
        if before is not None and steps < len(plan.cum):
            # Blocks were taken for the whole stretch; give back those of the boundaries it did not reach.
            bt = self.config.block_tokens
            for s, blocks in zip(seqs, before, strict=True):
                keep = max(blocks, -(-s.kv // bt) - s.shared)
                if s.blocks > keep:
                    self.free_blocks += s.blocks - keep
                    s.blocks = keep

    def _retire(self) -> None:
        keep = []
        for s in self._running:
            if s.generated >= s.output_tokens:
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
                cached_blocks=seq.cached_blocks,
                cache_saved_chip_us=self._saved_chip_us(seq),
                cancelled=cancelled,
            )
        )


class _DecodePlan:
    """A decode-only stretch in flight: its sequences, cumulative seconds after each iteration, how many of
    them have run, and the chip-µs those charged."""

    __slots__ = ("applied", "blocks_before", "chip_us", "cum", "seqs", "start_s")

    def __init__(self, seqs: list[SeqState], blocks_before: list[int] | None, cum: FloatArray, start_s: float) -> None:
        self.seqs = seqs
        self.blocks_before = blocks_before  # each sequence's private blocks before the stretch took its own
        self.cum = cum
        self.start_s = start_s
        self.applied = 0
        self.chip_us = 0
