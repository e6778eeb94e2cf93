"""The waiting queue of a replica: first come first served, or priority tiers with weighted fair share."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterator

from switchyard.accelerator.sim.sequence import EngineConfig, SeqState

__all__ = ["WaitQueue"]


class WaitQueue:
    """Requests waiting for admission.

    FCFS by default. With `EngineConfig.fair_share`, strict priority tiers (higher `Request.priority`
    first) and, within a tier, weighted fair queuing across tenants: each request gets the virtual finish
    tag `max(V, tenant's last tag) + (prompt + output tokens) / weight`, the smallest tag goes first, and
    V advances to the start tag of what was admitted, so a tenant that floods the queue only delays
    itself. Preempted requests always go back to the front: they already held memory.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.fair = config.fair_share
        self._weights = dict(config.tenant_weights)
        self._front: deque[SeqState] = deque()  # preempted, resumed first
        self._fifo: deque[SeqState] = deque()
        self._heap: list[tuple[int, float, int, float, SeqState]] = []
        self._last_tag: dict[str | None, float] = {}
        self._virtual = 0.0
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._front) + len(self._fifo) + len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._front or self._fifo or self._heap)

    def __iter__(self) -> Iterator[SeqState]:
        yield from self._front
        yield from self._fifo
        yield from (entry[4] for entry in self._heap)

    def push(self, seq: SeqState) -> None:
        if not self.fair:
            self._fifo.append(seq)
            return
        r = seq.req
        start = max(self._virtual, self._last_tag.get(r.tenant, 0.0))
        tag = start + (r.prompt_tokens + r.output_tokens) / self._weights.get(r.tenant or "", 1.0)
        self._last_tag[r.tenant] = tag
        heapq.heappush(self._heap, (-r.priority, tag, next(self._order), start, seq))

    def remove(self, request_id: int) -> SeqState | None:
        """Take a request out of the queue wherever it waits; ``None`` if it is not here."""
        for queue in (self._front, self._fifo):
            for seq in queue:
                if seq.req.request_id == request_id:
                    queue.remove(seq)
                    return seq
        for index, entry in enumerate(self._heap):
            if entry[4].req.request_id == request_id:
                self._heap[index] = self._heap[-1]
                self._heap.pop()
                heapq.heapify(self._heap)
                return entry[4]
        return None

    def push_front(self, seq: SeqState) -> None:
        self._front.appendleft(seq)

    def peek(self) -> SeqState:
        if self._front:
            return self._front[0]
        return self._fifo[0] if not self.fair else self._heap[0][4]

    def pop(self) -> SeqState:
        if self._front:
            return self._front.popleft()
        if not self.fair:
            return self._fifo.popleft()
        _, _, _, start, seq = heapq.heappop(self._heap)
        self._virtual = max(self._virtual, start)
        return seq
