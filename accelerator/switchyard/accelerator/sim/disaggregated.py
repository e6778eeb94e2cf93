"""Disaggregated serving: prompts run on a prefill pool, KV caches cross the network, a decode pool generates.

The two pools may be different hardware (e.g. Trainium2 prefill with Cerebras CS-3 decode). The KV
transfer of a request takes `prompt_tokens x KV bytes per token / link bandwidth + latency` after its
prefill finishes; only then can it join a decode replica. Chip time of both pools is attributed to it.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import replace

from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.requests import FinishedRequest, Request

__all__ = ["DisaggregatedCluster"]


class DisaggregatedCluster:
    """A prefill Cluster and a decode Cluster joined by a KV-transfer link. Same driving API as Cluster."""

    def __init__(
        self, prefill: Cluster, decode: Cluster, link_bytes_per_s: float | None = None, link_latency_s: float = 20e-6
    ) -> None:
        if prefill.deployment.model.name != decode.deployment.model.name:
            raise ValueError("prefill and decode pools must serve the same model")
        self.prefill = prefill
        self.decode = decode
        if link_bytes_per_s is None:  # the slower end's network, per replica
            gbps = min(prefill.deployment.instance.network_gbps, decode.deployment.instance.network_gbps)
            link_bytes_per_s = gbps * 1e9 / 8
        self.link_bytes_per_s = link_bytes_per_s
        self.link_latency_s = link_latency_s
        self._originals: dict[int, Request] = {}
        self._prefilled: dict[int, FinishedRequest] = {}
        self._transfers: list[tuple[float, int]] = []  # (arrival at the decode pool, request id)
        self._done: list[FinishedRequest] = []
        self.transferred_bytes = 0.0

    @property
    def now(self) -> float:
        return self.prefill.now

    @property
    def idle(self) -> bool:
        return self.prefill.idle and self.decode.idle and not self._transfers

    def transfer_s(self, prompt_tokens: int) -> float:
        """Seconds to move a prompt's KV cache from the prefill to the decode pool."""
        return prompt_tokens * self.decode.deployment.kv_bytes_per_token / self.link_bytes_per_s + self.link_latency_s

    def submit(self, request: Request) -> int:
        """Route the prompt to a prefill replica (prefill only: one output token)."""
        self._originals[request.request_id] = request
        self._pump(request.arrival_s)
        return self.prefill.submit(replace(request, output_tokens=1))

    def step_until(self, t: float) -> None:
        """Advance both pools to `t`, moving finished prefills across the link in time order."""
        self._pump(t)
        if math.isinf(t):
            while not self.idle:
                self._pump(math.inf)
        else:
            self.decode.step_until(t)

    def _pump(self, t: float) -> None:
        self.prefill.step_until(t)
        for f in self.prefill.collect():
            original = self._originals[f.request_id]
            if f.rejected is not None or original.output_tokens <= 1:
                del self._originals[f.request_id]
                self._done.append(replace(f, output_tokens=f.output_tokens))
                continue
            self._prefilled[f.request_id] = f
            self.transferred_bytes += original.prompt_tokens * self.decode.deployment.kv_bytes_per_token
            heapq.heappush(self._transfers, (f.finish_s + self.transfer_s(original.prompt_tokens), f.request_id))
        while self._transfers and self._transfers[0][0] <= t:
            at, rid = heapq.heappop(self._transfers)
            self.decode.submit(self._originals[rid], at_s=at, first_token_s=self._prefilled[rid].finish_s)
        if math.isinf(t):
            self.decode.step_until(math.inf)
        self._merge(self.decode.collect())

    def _merge(self, finished: list[FinishedRequest]) -> None:
        for d in finished:
            p = self._prefilled.pop(d.request_id)
            del self._originals[d.request_id]
            self._done.append(
                replace(
                    d,
                    scheduled_s=p.scheduled_s,
                    first_token_s=p.finish_s,
                    chip_us=p.chip_us + d.chip_us,
                    preemptions=p.preemptions + d.preemptions,
                    recomputed_tokens=p.recomputed_tokens + d.recomputed_tokens,
                    cached_tokens=p.cached_tokens,
                    cached_blocks=p.cached_blocks,
                )
            )

    def collect(self) -> list[FinishedRequest]:
        """Requests finished (decode done, or rejected) since the last call."""
        done, self._done = self._done, []
        done.sort(key=lambda f: (f.finish_s, f.request_id))
        return done

    def run(self, requests: list[Request]) -> list[FinishedRequest]:
        """Offline: submit every request in arrival order, then drain."""
        for req in requests:
            self.submit(req)
        self.step_until(math.inf)
        return self.collect()
