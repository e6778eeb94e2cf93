"""The configuration search against a brute-force sweep of the same space, side by side.

    .venv/bin/python benchmarks/config_search.py [--requests 200] [--small]

Llama-3.3-70B-Instruct on the shared 10,000-request workload (``data/traces/conv_10k_poisson4.csv``, its first
``--requests`` requests per rate tried), SLO p90 TTFT <= 2 s and TPOT <= 100 ms, over every priced Trainium,
Inferentia and GPU instance x TP 1-64 x 1-8 replicas x max batch 16-128 x two routing policies x BF16/FP8 weights.
``simulate search`` (pruning: a configuration whose best possible point is already beaten is not simulated) and
the sweep (every configuration simulated) run one after the other in this process; the table gives each one's
wall and CPU time, configurations simulated, and whether both found the same Pareto front and the same cheapest
configuration per instance. ``--small`` searches a slice of the space (a quick check).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from switchyard.accelerator.sim.search import SearchResult, SearchSettings, Slo, search
from switchyard.accelerator.sim.search_space import configuration_space
from switchyard.accelerator.sim.workloads import load_workload_file

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
WORKLOAD = Path(__file__).parent / "data" / "traces" / "conv_10k_poisson4.csv"
INSTANCES = (
    "trn1.32xlarge,trn1n.32xlarge,inf2.48xlarge,trn2.48xlarge,trn2u.48xlarge,trn3-gen1-ultraserver,"
    "p4d.24xlarge,p4de.24xlarge,p5.48xlarge,p5en.48xlarge"
)
SPACE = {
    "tps": (1, 2, 4, 8, 16, 32, 64),
    "replicas": (1, 2, 4, 8),
    "max_batches": (16, 32, 64, 128),
    "routings": ("round_robin", "least_load"),
    "weights": ("bf16", "fp8"),
}
SMALL = {**SPACE, "replicas": (1, 2), "max_batches": (64,), "routings": ("least_load",)}
SLO = Slo(ttft_ms=2000.0, tpot_ms=100.0, percentile=90.0)


def timed(prune: bool, space: list, workload: list, settings: SearchSettings) -> tuple[SearchResult, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = search(space, workload, SLO, settings, prune=prune)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="requests simulated per rate tried")
    parser.add_argument("--small", action="store_true", help="a slice of the space")
    args = parser.parse_args()
    options = SMALL if args.small else SPACE
    space, skipped = configuration_space(MODEL, INSTANCES.split(","), **options)  # type: ignore[arg-type]
    workload = load_workload_file(WORKLOAD)
    settings = SearchSettings(requests=args.requests)
    print(f"{MODEL} on {WORKLOAD.name}: {len(space) + len(skipped)} configurations, {len(skipped)} cannot run")
    searched, search_wall, search_cpu = timed(True, space, workload, settings)
    swept, sweep_wall, sweep_cpu = timed(False, space, workload, settings)
    same_front = searched.to_dict()["pareto"] == swept.to_dict()["pareto"]
    same_best = searched.to_dict()["best_per_instance"] == swept.to_dict()["best_per_instance"]
    print(f"\n{'':<12} {'simulated':>9} {'pruned':>7} {'wall s':>8} {'CPU s':>8}")
    for name, result, wall, cpu in (
        ("search", searched, search_wall, search_cpu),
        ("brute force", swept, sweep_wall, sweep_cpu),
    ):
        print(f"{name:<12} {result.configurations_evaluated:>9} {result.pruned:>7} {wall:>8.1f} {cpu:>8.1f}")
    print(
        f"\nsearch / brute force: {search_wall / sweep_wall:.2f}x the wall time, {search_cpu / sweep_cpu:.2f}x the CPU;"
        f" same Pareto front: {same_front}; same cheapest per instance: {same_best}"
    )
    for point in searched.to_dict()["pareto"]:
        print(
            f"  front: {point['instance']} TP{point['tp']} x{point['replicas']} batch {point['max_batch']} "
            f"{point['routing']} {point['weights']}: {point['max_rate_rps']:.2f} req/s, "
            f"${point['cost_per_million_tokens_usd']} per M output tokens, TTFT p90 {point['ttft_p90_ms']:.0f} ms"
        )


if __name__ == "__main__":
    main()
