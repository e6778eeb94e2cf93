"""Simulator speed, side by side in one run, as ratios.

1. The Vidur workload (benchmarks/data/traces/conv_10k_poisson4.csv: the 10,000 requests Vidur generated, Poisson
   at 4 requests/s, Azure conversation lengths), served as Vidur served them: Llama-2-70B at TP2 on A100 80GB
   (p4de.24xlarge; p5.48xlarge if the catalog has no A100), 4 replicas, round-robin routing, chunks of 512 tokens,
   at most 128 sequences per replica. Played 1x and 4x back to back. Reports CPU µs per simulated request and
   requests per CPU-second against Vidur's event loop on the same work (~1,900 µs per request, 521 requests per
   CPU-second, measured on this project's machine: see docs/simulator.md and the recipe it points to).
2. The Azure conversation trace (19,366 requests) on 4 replicas of Llama-2-70B on trn2.48xlarge TP64, least-load
   routing, played 1x, 4x and 16x back to back.

Both tables give requests per wall-clock second and per CPU second of this process (the simulator is
single-threaded; CPU time is less disturbed by other work on the machine), simulated time / wall time, and CPU cost
per request relative to the first scale (1.0 = perfectly linear in requests). Each scale runs `--repeat` times; the
run with the least CPU time is reported.

    .venv/bin/python benchmarks/sim_speed.py [--only vidur|azure] [--repeat 2] [--vidur-scales 1,4] [--scales 1,4,16]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from switchyard.accelerator.errors import UnknownNameError
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import Deployment, make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hardware import get_instance
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.workloads import load_azure_trace, load_csv_workload, repeat_workload

DATA = Path(__file__).resolve().parent / "data" / "traces"
DEFAULT_TRACE = DATA / "azure_llm_2023_conv.csv"
VIDUR_TRACE = DATA / "conv_10k_poisson4.csv"
# Vidur 0.0.26's event loop on the same 10,000 requests (docs/simulator.md, "Speed"): CPU µs per simulated request.
VIDUR_CPU_US_PER_REQUEST = 1900.0


def _a100_or_h100() -> str:
    try:
        get_instance("p4de.24xlarge")
    except UnknownNameError:
        return "p5.48xlarge"
    return "p4de.24xlarge"


def _table(
    title: str,
    base: list[Request],
    dep: Deployment,
    replicas: int,
    policy: str,
    config: EngineConfig,
    scales: list[int],
    repeat: int,
    reference_us: float | None,
) -> None:
    print(title)
    ref = f" {'x Vidur/cpu s':>13}" if reference_us else ""
    print(
        f"{'scale':>5} {'requests':>9} {'wall s':>8} {'cpu s':>7} {'cpu us/req':>10} {'req/wall s':>11} "
        f"{'req/cpu s':>10} {'sim s/wall s':>13} {'iterations':>11} {'cpu/req vs 1st':>14}{ref}"
    )
    first: float | None = None
    for scale in scales:
        reqs = repeat_workload(base, scale)
        best: tuple[float, float, Cluster] | None = None
        for _ in range(max(1, repeat)):
            cluster = Cluster(dep, replicas, policy, config=config)
            w0, c0 = time.perf_counter(), time.process_time()
            finished = cluster.run(reqs)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            assert len(finished) == len(reqs)
            if best is None or cpu < best[1]:
                best = (wall, cpu, cluster)
        assert best is not None
        wall, cpu, cluster = best
        per_request = cpu / len(reqs)
        first = first or per_request
        iterations = sum(r.iterations for r in cluster.replicas)
        vs = f" {reference_us / (per_request * 1e6):>12.1f}x" if reference_us else ""
        print(
            f"{scale:>5} {len(reqs):>9} {wall:>8.2f} {cpu:>7.2f} {per_request * 1e6:>10.1f} {len(reqs) / wall:>11.0f} "
            f"{len(reqs) / cpu:>10.0f} {cluster.makespan_s / wall:>13.0f} {iterations:>11} "
            f"{per_request / first:>14.2f}{vs}"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("vidur", "azure"), default=None)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--model", default="meta-llama/Llama-2-70b-hf")
    parser.add_argument("--instance", default="trn2.48xlarge")
    parser.add_argument("--tp", type=int, default=64)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--scales", default="1,4,16")
    parser.add_argument("--vidur-instance", default=None, help="default: p4de.24xlarge (A100 80GB), else p5.48xlarge")
    parser.add_argument("--vidur-scales", default="1,4")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    if args.only in (None, "vidur"):
        instance = args.vidur_instance or _a100_or_h100()
        _table(
            f"Vidur workload: {VIDUR_TRACE.name}, 4 x {instance} tp=2, meta-llama/Llama-2-70b-hf, round robin, "
            f"chunk 512, batch cap 128; Vidur: {VIDUR_CPU_US_PER_REQUEST:,.0f} us of CPU per request",
            load_csv_workload(VIDUR_TRACE),
            make_deployment("meta-llama/Llama-2-70b-hf", instance, 2),
            4,
            "round_robin",
            EngineConfig(max_batch=128, max_batched_tokens=512),
            [int(s) for s in args.vidur_scales.split(",")],
            args.repeat,
            VIDUR_CPU_US_PER_REQUEST,
        )
    if args.only in (None, "azure"):
        base = load_azure_trace(args.trace)
        _table(
            f"{args.trace.name} ({len(base)} requests): {args.replicas} x {args.instance} tp={args.tp}, {args.model}, "
            "least load",
            base,
            make_deployment(args.model, args.instance, args.tp),
            args.replicas,
            "least_load",
            EngineConfig(),
            [int(s) for s in args.scales.split(",")],
            args.repeat,
            None,
        )


if __name__ == "__main__":
    main()
