"""Calibration errors per hardware group: fit the simulator to every published table in benchmarks/data and print
in-sample and leave-one-model-out errors (median and p90 of |predicted - measured| / measured, TTFT and TPOT) as
the markdown tables of docs/simulator.md, then every row's errors.

    .venv/bin/python benchmarks/calibration_errors.py [--rows]

The same fit as `python -m switchyard.accelerator calibrate --data ... --out ...` (which also writes the
coefficients file); this script only reads.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from switchyard.accelerator.calibration import calibrate, read_benchmarks

DATA = Path(__file__).resolve().parent / "data"
TABLES = ("neuron_benchmarks.csv", "neuron_benchmarks_2025.csv", "gpu_benchmarks.csv")


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", action="store_true", help="also print every row's errors")
    args = parser.parse_args()
    result = calibrate(read_benchmarks(*(DATA / t for t in TABLES)))
    print(
        "| group | rows (TTFT/TPOT) | TTFT median | TTFT p90 | TPOT median | TPOT p90 | CV TTFT median | CV TTFT p90 |"
        " CV TPOT median | CV TPOT p90 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    groups = {"all rows": result.summary()} | result.summary_by_group()
    for name, s in groups.items():
        i, c = s["in_sample"], s["leave_one_model_out"]
        cells = [
            f"{i['ttft_rows']:.0f}/{i['tpot_rows']:.0f}",
            *(
                _pct(i[k])
                for k in ("ttft_median_abs_pct", "ttft_p90_abs_pct", "tpot_median_abs_pct", "tpot_p90_abs_pct")
            ),
            *(
                _pct(c[k])
                for k in ("ttft_median_abs_pct", "ttft_p90_abs_pct", "tpot_median_abs_pct", "tpot_p90_abs_pct")
            ),
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.rows:
        cv = {e.row: e for e in result.cross_validation}
        print()
        print(
            f"{'model':40} {'instance':14} {'stack':28} {'B':>2} {'in':>5} {'out':>5} "
            f"{'TTFT':>8} {'err%':>6} {'CV%':>6} {'TPOT':>6} {'err%':>6} {'CV%':>6}"
        )
        for e in result.in_sample:
            r, c = e.row, cv.get(e.row)
            print(
                f"{r.model[:40]:40} {r.instance:14} {r.stack[:28]:28} {r.batch:>2} {r.input_len:>5} {r.output_len:>5} "
                f"{r.ttft_ms:8.1f} {e.ttft_err * 100:6.1f} {(c.ttft_err * 100 if c else math.nan):6.1f} "
                f"{r.tpot_ms:6.2f} {e.tpot_err * 100:6.1f} {(c.tpot_err * 100 if c else math.nan):6.1f}"
            )


if __name__ == "__main__":
    main()
