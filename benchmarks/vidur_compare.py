"""Switchyard against Vidur on Vidur's own A100 workload and single-request shapes.

The workload is the one of benchmarks/data/vidur_a100_reference.json: 10,000 requests Vidur generated
(Poisson arrivals at 4 req/s, lengths from the Azure 2023 conversation trace, prompt + output clipped to
4,096; data/traces/conv_10k_poisson4.csv), served by 4 replicas of Llama-2-70B on A100 80GB at TP2
(p4de.24xlarge), Sarathi-style chunked prefill (512-token chunks, at most 128 sequences), round-robin routing.
Vidur's figures (reproduced with its recipe, see the reference file) are compared with Switchyard's on
the same requests, and single prefills/decode steps on one replica with Switchyard's point mode.

    .venv/bin/python benchmarks/vidur_compare.py [--json out.json]

Prints a table of medians and tails with the ratio Switchyard / Vidur.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.stepcost import StepCost

DATA = Path(__file__).resolve().parent / "data"
TRACE = DATA / "traces" / "conv_10k_poisson4.csv"
REFERENCE = DATA / "vidur_a100_reference.json"
MODEL, INSTANCE, TP, REPLICAS = "meta-llama/Llama-2-70b-hf", "p4de.24xlarge", 2, 4


def load_requests(path: Path = TRACE) -> list[Request]:
    """Vidur's generated requests (arrived_at, num_prefill_tokens, num_decode_tokens) as engine requests."""
    with path.open(newline="", encoding="utf-8") as fh:
        return [
            Request(i, float(r["arrived_at"]), int(r["num_prefill_tokens"]), int(r["num_decode_tokens"]))
            for i, r in enumerate(csv.DictReader(fh))
        ]


def fleet_percentiles(chunk_tokens: int = 512, max_batch: int = 128) -> dict[str, dict[str, float]]:
    """TTFT, TPOT and E2E percentiles (ms) of Switchyard on the Vidur workload."""
    dep = make_deployment(MODEL, INSTANCE, TP)
    cluster = Cluster(
        dep,
        REPLICAS,
        "round_robin",
        config=EngineConfig(max_batch=max_batch, max_batched_tokens=chunk_tokens),
    )
    done = [f for f in cluster.run(load_requests()) if f.rejected is None]
    # Vidur's TPOT: (finish - first token) / (output - 1), over requests with more than one output token.
    metrics = {
        "ttft_ms": [f.ttft_ms for f in done],
        "tpot_ms": [f.tpot_ms for f in done if f.output_tokens > 1],
        "e2e_ms": [f.e2e_ms for f in done],
    }
    return {k: {f"p{q}": float(np.percentile(v, q)) for q in (50, 90, 99)} for k, v in metrics.items()}


def single_request_ms() -> dict[str, float]:
    """One replica, one request: a whole prefill (chunk 4,096 or 512) and one decode step, in ms."""
    dep = make_deployment(MODEL, INSTANCE, TP)
    cost = StepCost(dep, coefficients_for(dep.instance)[1])

    def prefill(n: int, chunk: int) -> float:
        total, done = 0.0, 0
        while done < n:
            c = min(chunk, n - done)
            total += cost.iteration_s(c, c * (done + c / 2.0), float(done), [], 1)  # causal: half the square
            done += c
        return total * 1e3

    return {
        "prefill_512_chunk_4096": prefill(512, 4096),
        "prefill_2048_chunk_4096": prefill(2048, 4096),
        "prefill_2048_chunk_512": prefill(2048, 512),
        "decode_ctx_512": cost.iteration_s(0, 0.0, 0.0, [512]) * 1e3,
        "decode_ctx_2048": cost.iteration_s(0, 0.0, 0.0, [2048]) * 1e3,
    }


def compare() -> dict[str, object]:
    ref = json.loads(REFERENCE.read_text("utf-8"))
    ours_fleet = fleet_percentiles()
    ours_single = single_request_ms()
    rows = []
    for metric, by_q in ours_fleet.items():
        for q, v in by_q.items():
            theirs = ref["fleet"][metric][q]
            rows.append({"what": f"{metric} {q}", "switchyard": v, "vidur": theirs, "ratio": v / theirs})
    for shape, v in ours_single.items():
        theirs = ref["single_request_ms"][shape]
        rows.append({"what": shape, "switchyard": v, "vidur": theirs, "ratio": v / theirs})
    group, _ = coefficients_for(make_deployment(MODEL, INSTANCE, TP).instance)
    return {"coefficients": group, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None, help="also write the comparison as JSON")
    args = parser.parse_args()
    result = compare()
    print(f"{REPLICAS} x {MODEL} on {INSTANCE} tp={TP} (coefficients: {result['coefficients']}), Vidur's workload")
    print(f"{'':28} {'Switchyard':>11} {'Vidur':>10} {'ratio':>7}")
    for r in result["rows"]:  # type: ignore[attr-defined]
        print(f"{r['what']:28} {r['switchyard']:11.1f} {r['vidur']:10.1f} {r['ratio']:7.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
