"""KV-cache-aware routing: send a request where its prompt's prefix is cached, unless the load there outweighs it.

The router keeps, per replica, an approximate index of the block hashes it has sent there (as SGLang's cache-aware
router keeps a radix tree of what it routed): least recently routed first, holding as many tokens as the
replica's KV cache, so it forgets roughly what the replica's LRU evicts. For each replica it estimates the time
to the request's first token:

    ttft_i = (prefill tokens queued or running on i + this prompt's tokens not cached on i) * prefill s/token of i
             + (the replica's queued work in seconds, `load_s`, if the request's KV pages fit neither in free nor in
                evictable memory there: it waits for running requests to finish)
    cost_i = ttft_i + DECODER_WEIGHT * running sequences on i * this prompt's uncached tokens * prefill s/token of i

The last term is the delay this prefill imposes on the requests decoding there (each waits for its chunks),
weighed less than the request's own wait: spread over a running request's remaining answer, a second costs its
time per output token far less than a second of TTFT costs this request (1/8, chosen on benchmarks/kv_routing.py's
agentic and Poisson workloads). The router picks the smallest cost, ties to the least loaded (`load_s`, the
least_load policy's signal), then the lowest index. Without shared prefixes every replica's uncached share is the
whole prompt, so on identical replicas the choice weighs prefill backlog and running requests, and among idle
replicas it is least_load's. A session hint keeps a conversation together when
no replica holds any of its blocks: the replica of the session's previous turn wins if its estimate is within
one full prefill of the best.

The router's state is bounded, so a live pool can keep one for months: each replica's index holds at most its
KV capacity in tokens (KV capacity / block tokens entries, least recently routed forgotten first), and the
session map at most `MAX_SESSIONS` sessions, least recently seen forgotten first (a forgotten session's next
turn finds its history by its blocks, or starts afresh where the cost model says).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from switchyard.accelerator.sim.engine import ReplicaEngine
from switchyard.accelerator.sim.requests import Request

__all__ = ["KvAwareRouter"]

_PROBE_TOKENS = 2048  # a chunk of this many tokens gives a replica's prefill seconds per token
DECODER_WEIGHT = 0.125  # a second of delay imposed on a running request, in seconds of this request's TTFT
MAX_SESSIONS = 65_536  # sessions remembered (least recently seen forgotten first)


class _ReplicaIndex:
    """Block hashes routed to one replica, least recently routed first, up to its KV capacity in tokens."""

    __slots__ = ("capacity_tokens", "hashes", "tokens")

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity_tokens = capacity_tokens
        self.hashes: OrderedDict[int, int] = OrderedDict()  # hash -> tokens of its block
        self.tokens = 0

    def matched(self, hashes: Sequence[int], limit: int) -> int:
        index = self.hashes
        m = 0
        while m < limit and hashes[m] in index:
            m += 1
        return m

    def add(self, hashes: Sequence[int], block_tokens: int) -> None:
        index = self.hashes
        for h in reversed(hashes):  # the head ends most recent: a chain's tail is forgotten first
            if h in index:
                index.move_to_end(h)
            else:
                index[h] = block_tokens
                self.tokens += block_tokens
        while self.tokens > self.capacity_tokens and index:
            self.tokens -= index.popitem(last=False)[1]


class KvAwareRouter:
    """The `kv_aware` policy (see the module docstring for its cost model)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._indexes: list[_ReplicaIndex] = []
        self._prefill_s: list[float] = []
        self._sessions: OrderedDict[str, int] = OrderedDict()  # least recently seen first
        self._max_sessions = max_sessions

    def _grow(self, replicas: Sequence[ReplicaEngine]) -> None:
        for r in replicas[len(self._indexes) :]:
            self._indexes.append(_ReplicaIndex(r.cache_capacity_tokens))
            n = _PROBE_TOKENS
            self._prefill_s.append(r.cost.iteration_s(n, float(n * n), 0.0, [], 1) / n)

    def estimates(self, request: Request, replicas: Sequence[ReplicaEngine]) -> list[tuple[float, int]]:
        """(cost in seconds, prompt tokens cached) on each replica (see the module docstring)."""
        self._grow(replicas)
        hashes, hb = request.block_hashes, request.hash_block_tokens
        limit = min(len(hashes), (request.prompt_tokens - 1) // hb) if hb > 0 else 0
        out = []
        for r, index, per_token in zip(replicas, self._indexes, self._prefill_s, strict=False):
            matched = index.matched(hashes, limit) if limit else 0
            if r.host is not None and matched < limit:  # the instance's host tier, which every replica there reads
                matched += r.host.run(hashes, matched, limit, read=False)
            cached = matched * hb
            uncached = request.prompt_tokens - cached
            ttft = (r.prefill_backlog_tokens + uncached) * per_token
            ttft += DECODER_WEIGHT * r.running * uncached * per_token
            pages = -(-(uncached + request.output_tokens) // r.config.block_tokens)
            if pages > r.free_blocks + r.prefixes.evictable_pages:
                ttft += r.load_s
            out.append((ttft, cached))
        return out

    def choose(self, request: Request, replicas: Sequence[ReplicaEngine]) -> int:
        est = self.estimates(request, replicas)
        best = min(range(len(replicas)), key=lambda i: (est[i][0], replicas[i].load_s, i))
        session = request.session
        if session is not None:
            previous = self._sessions.get(session)
            if previous is not None and previous < len(replicas) and not any(c for _, c in est):
                full_prefill_s = request.prompt_tokens * self._prefill_s[previous]
                if est[previous][0] <= est[best][0] + full_prefill_s:
                    best = previous
            self._sessions[session] = best
            self._sessions.move_to_end(session)
            if len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        if request.block_hashes:
            self._indexes[best].add(request.block_hashes, request.hash_block_tokens)
        return best
