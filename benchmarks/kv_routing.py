"""KV-cache-aware routing, side by side: round_robin, least_load, prefix_affinity and kv_aware on one fleet.

Fleet: 4 x Llama-3.1-8B at TP8 on trn2.48xlarge, prefix caching on (for the Mooncake trace, a whole instance: 8 such
replicas, each with 200 GiB of the instance's 2 TiB host memory as a KV tier shared by all of them). Workloads:
(a) the agentic generator (16 agents with 4k-token system prompts, every turn re-sending its history) at several
    session rates, SLO 500 ms TTFT / 50 ms TPOT;
(b) the Mooncake conversation trace (benchmarks/data/traces/mooncake_conversation_trace.jsonl, 512-token hash
    blocks) with its arrival rate scaled to load the fleet near saturation; its prompts average 12k tokens, whose
    prefill alone takes ~1.4 s on one replica, so its SLO is `--mooncake-slo-ttft-ms` (default 5 s) / 50 ms; first
    on the 4 replicas' device memory alone, then on the whole instance with its host KV tier (what Mooncake's
    KVCache-centric design relies on: the trace's reuse needs more memory than the accelerators hold);
(c) a Poisson control without shared prefixes (3,000 requests, 1k-token prompts, 256-token answers) at 8-12
    requests/s (97-98 % of requests within the SLO on every policy), SLO 500 ms / 50 ms.

Columns: goodput (requests per second meeting the SLO) and its ratio to round_robin's, SLO attainment, TTFT p50/p90,
the share of prompt blocks served from the replicas' caches (device or host tier), the same share for one infinite
cache (the ceiling) and for one LRU cache as large as the whole fleet's KV memory, host tiers included (what this
fleet's memory allows), and busy chip-ms per request.

    .venv/bin/python benchmarks/kv_routing.py [--only agentic|mooncake|poisson] [--rates 1,2,3,4,5,6]
        [--sessions 300] [--mooncake-scales 0.1,0.18,0.26] [--mooncake-host-scales 0.6,0.7,0.8]
        [--mooncake-limit N]
"""

from __future__ import annotations

import argparse
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from switchyard.accelerator.sim.block_hashes import ideal_hit_rate
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.metrics import summarize
from switchyard.accelerator.sim.mooncake import load_mooncake_trace
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.workloads import agentic_workload, poisson_workload, scale_rate

TRACE = Path(__file__).resolve().parent / "data" / "traces" / "mooncake_conversation_trace.jsonl"
POLICIES = ("round_robin", "least_load", "prefix_affinity", "kv_aware")
DEPLOYMENT = make_deployment("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8)
REPLICAS = 4
INSTANCE_REPLICAS = DEPLOYMENT.instance.chips // DEPLOYMENT.chips  # 8: a whole trn2.48xlarge
HOST_KV_GIB = 200.0  # per replica: 1.6 TiB of the instance's 2 TiB host memory


def fleet_lru_hit_rate(requests: Sequence[Request], capacity_tokens: int) -> float:
    """Block hit share of one LRU cache holding `capacity_tokens` tokens, shared by every request."""
    lru: OrderedDict[int, int] = OrderedDict()
    held = hits = blocks = 0
    for r in sorted(requests, key=lambda q: (q.arrival_s, q.request_id)):
        k = 0
        while k < len(r.block_hashes) and r.block_hashes[k] in lru:
            k += 1
        hits += k
        blocks += len(r.block_hashes)
        for h in reversed(r.block_hashes):
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = r.hash_block_tokens
                held += r.hash_block_tokens
        while held > capacity_tokens and lru:
            held -= lru.popitem(last=False)[1]
    return hits / blocks if blocks else 0.0


def table(
    title: str,
    requests: list[Request],
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    replicas: int = REPLICAS,
    config: EngineConfig | None = None,
) -> None:
    config = config or EngineConfig()
    print(f"{title}: {len(requests)} requests, SLO TTFT <= {slo_ttft_ms:g} ms, TPOT <= {slo_tpot_ms:g} ms")
    ideal = ideal_hit_rate(requests).blocks
    host_tokens = int(config.host_kv_gib * 2**30 // DEPLOYMENT.kv_bytes_per_token)
    fleet = fleet_lru_hit_rate(requests, replicas * (DEPLOYMENT.kv_capacity_tokens + host_tokens))
    print(
        f"{'policy':16} {'goodput':>8} {'x rr':>6} {'SLO met':>8} {'TTFT p50':>9} {'TTFT p90':>9} "
        f"{'hit blk':>8} {'ceiling':>8} {'fleet LRU':>9} {'chip-ms/req':>11}"
    )
    base = None
    for policy in POLICIES:
        cluster = Cluster(DEPLOYMENT, replicas, policy, config=config)
        finished = cluster.run(requests)
        s = summarize(finished, cluster, slo_ttft_ms, slo_tpot_ms, requests)
        assert s.prefix_hit_rate is not None
        base = base or s.goodput_requests_per_s
        ratio = s.goodput_requests_per_s / base if base else float("nan")
        print(
            f"{policy:16} {s.goodput_requests_per_s:>8.3f} {ratio:>5.2f}x {s.slo_attainment:>8.1%} "
            f"{s.ttft_ms['p50']:>9.0f} {s.ttft_ms['p90']:>9.0f} {s.prefix_hit_rate['blocks']:>8.1%} "
            f"{ideal:>8.1%} {fleet:>9.1%} {s.chip_us / max(1, s.requests) / 1e3:>11.1f}",
            flush=True,
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("agentic", "mooncake", "poisson"), default=None)
    parser.add_argument("--rates", default="1,2,3,4,5,6", help="agentic sessions per second")
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--mooncake-scales", default="0.1,0.18,0.26", help="multiply the trace's arrival rate")
    parser.add_argument("--mooncake-host-scales", default="0.6,0.7,0.8", help="the same, on the whole instance")
    parser.add_argument("--mooncake-limit", type=int, default=None, help="first N requests of the trace")
    parser.add_argument("--mooncake-slo-ttft-ms", type=float, default=5000.0)
    parser.add_argument("--poisson-rates", default="8,10,12")
    args = parser.parse_args()
    fleet = f"{REPLICAS} x {DEPLOYMENT.model.name} tp={DEPLOYMENT.tp} on {DEPLOYMENT.instance.name}"
    print(f"fleet: {fleet}\n")
    if args.only in (None, "agentic"):
        for rate in (float(r) for r in args.rates.split(",")):
            reqs = agentic_workload(args.sessions, rate, agents=16, system_prompt_tokens=4096, seed=0)
            table(f"(a) agentic, {rate:g} sessions/s", reqs, 500.0, 50.0)
    if args.only in (None, "mooncake"):
        trace = load_mooncake_trace(TRACE, limit=args.mooncake_limit)
        for scale in (float(s) for s in args.mooncake_scales.split(",")):
            table(f"(b) Mooncake conversation trace at {scale:g}x its rate", scale_rate(trace, scale),
                  args.mooncake_slo_ttft_ms, 50.0)  # fmt: skip
        host = EngineConfig(host_kv_gib=HOST_KV_GIB)
        for scale in (float(s) for s in args.mooncake_host_scales.split(",")):
            title = f"(b) Mooncake at {scale:g}x, {INSTANCE_REPLICAS} replicas + host KV tier {HOST_KV_GIB:g} GiB"
            table(title, scale_rate(trace, scale), args.mooncake_slo_ttft_ms, 50.0, INSTANCE_REPLICAS, host)
    if args.only in (None, "poisson"):
        for rate in (float(r) for r in args.poisson_rates.split(",")):
            table(f"(c) Poisson control, {rate:g} requests/s", poisson_workload(3000, rate, seed=0), 500.0, 50.0)


if __name__ == "__main__":
    main()
