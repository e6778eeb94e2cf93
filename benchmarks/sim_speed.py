"""Simulator speed: the Azure conversation trace (19,366 requests) served by 4 replicas of a Llama-2-70B
class deployment, played 1x, 4x and 16x back to back. Prints simulated requests per wall-clock second
and per CPU second of this process (the simulator is single-threaded; CPU time is less disturbed by
other work on the machine), simulated time / wall time, and the CPU cost per request relative to 1x
(1.0 = perfectly linear). Each scale runs `--repeat` times; the fastest run is reported.

    .venv/bin/python benchmarks/sim_speed.py [--trace PATH] [--instance trn2.48xlarge --tp 64] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from switchyard.accelerator.cluster import Cluster
from switchyard.accelerator.deployment import make_deployment
from switchyard.accelerator.workloads import load_azure_trace, repeat_workload

DEFAULT_TRACE = Path(__file__).resolve().parent / "data" / "traces" / "azure_llm_2023_conv.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--model", default="meta-llama/Llama-2-70b-hf")
    parser.add_argument("--instance", default="trn2.48xlarge")
    parser.add_argument("--tp", type=int, default=64)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--scales", default="1,4,16")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    base = load_azure_trace(args.trace)
    dep = make_deployment(args.model, args.instance, args.tp)
    print(
        f"{args.replicas} x {args.instance} tp={args.tp}, {args.model}; trace {args.trace.name} ({len(base)} requests)"
    )
    print(
        f"{'scale':>5} {'requests':>9} {'wall s':>8} {'cpu s':>7} {'req/wall s':>11} {'req/cpu s':>10} "
        f"{'req/wall min':>13} {'sim s/wall s':>13} {'iterations':>11} {'cpu/req vs 1x':>14}"
    )
    per_request_1x = None
    for scale in (int(s) for s in args.scales.split(",")):
        reqs = repeat_workload(base, scale)
        best: tuple[float, float, Cluster] | None = None
        for _ in range(max(1, args.repeat)):
            cluster = Cluster(dep, args.replicas, "least_load")
            w0, c0 = time.perf_counter(), time.process_time()
            finished = cluster.run(reqs)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            assert len(finished) == len(reqs)
            if best is None or cpu < best[1]:
                best = (wall, cpu, cluster)
        assert best is not None
        wall, cpu, cluster = best
        per_request = cpu / len(reqs)
        per_request_1x = per_request_1x or per_request
        iterations = sum(r.iterations for r in cluster.replicas)
        print(
            f"{scale:>5} {len(reqs):>9} {wall:>8.2f} {cpu:>7.2f} {len(reqs) / wall:>11.0f} {len(reqs) / cpu:>10.0f} "
            f"{60 * len(reqs) / wall:>13.0f} {cluster.makespan_s / wall:>13.0f} {iterations:>11} "
            f"{per_request / per_request_1x:>14.2f}"
        )


if __name__ == "__main__":
    main()
