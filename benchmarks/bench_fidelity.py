"""How faithful is `simulate bench` on the published 2026 Neuron rows? Predicted vs measured, per row and per group.

    .venv/bin/python benchmarks/bench_fidelity.py

Reads `benchmarks/data/neuron_2026/neuron_benchmarks_2026.csv` and `neuron_benchmarks_unpinned_2026.csv`
(`benchmarks/data/README.md`), parses each row's free-text columns into a FidelityRow, or a Skipped with the first
reason it cannot be run, runs every
usable row once and prints the signed error (predicted - measured) / measured in % of TTFT, TPOT (the bench's
ITL) and output tokens per second, then per group the rows used and the median and p90 of |error|, then the
skipped rows counted per reason. Nothing is fitted: the simulator's committed coefficients are used as they are.

Parsing rules (first failing check wins, in this order):
- model: the id as published must resolve through the simulator's catalog or alias table (sim/models.py).
- instance: the first catalog instance name written in the cell ("trn2 (README: trn2.48xlarge tested)" is
  trn2.48xlarge). Trainium3 rows name instances the catalog lacks (trn3.48xlarge, trn3pd98.3xlarge, "Trainium 3");
  the catalog's Trainium3 hardware is the Gen1 UltraServer, whose chip, hop latency and calibration group a
  replica of a few chips shares, so they run on TRN3_STAND_IN and are flagged "trn3 stand-in" (an assumption:
  the UltraServer's switched interconnect stands in for the instance's own).
- tp: the cell's first integer. "DP=N" with N > 1 is skipped (the bench runs one replica, the rows measure N
  behind a proxy); "LNC=1" on a chip whose default is LNC=2 is skipped (the simulator's ranks are LNC=2 logical
  cores). "EP=N"/"moe_ep" with N > 1 runs as plain TP (simulate_bench has no expert parallelism): flagged "EP".
- load: "static" in `concurrency_or_static` makes a static batch (its "batch=N", else the `batch` cell's leading
  integer), run with simulate_point. Otherwise the row is a closed loop: guidellm "synchronous", "single
  stream" and "single request" at concurrency 1; "concurrency=N", "batch/concurrency N (vLLM serving)",
  "N concurrent" and guidellm "throughput; N users" at N. A range ("1-64"), an open-loop rate ("asynchronous@R")
  or no number is skipped. The engine's max_batch is the `batch` cell's leading integer (vLLM's max-num-seqs)
  when it has one, else the concurrency; the engine's prefix caching is off (rows with it on are skipped).
- lengths: a leading number, "k" meaning 1,024 ("4k" is 4,096; "~1500 (emulated)" and "1500 (+-150)" are 1,500;
  "7-token prompt; ..." is 7). Compiled buckets ("seq_len 4096", "CTE bucket 128", "max_context_length"),
  datasets, "dataset-defined", "not stated" and ranges ("24-32") are unknown lengths.
- rows with speculative decoding, prefix caching on, or disaggregation are skipped (the bench models none).
- weights: "bf16" when the cell starts with it and stores no FP8 (dequantised/upcast FP8 checkpoints are bf16),
  "fp8" when FP8 is stored (mixed FP8-expert rows included), bf16 when not stated.
- statistic: the notes' "STAT=" (mean, p99, not stated), else p50. A p99 row is compared with the predicted p99,
  every other row with the predicted p50 (the bench reports percentiles, not means). Output tokens per second
  are compared with the bench's aggregate rate (at concurrency 1, the per-request rate).
- group: the instance family (trn2.3xlarge, trn2.48xlarge, trn3, inf2, trn1), "(unpinned)" for the second file.
"""

from __future__ import annotations

import csv
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from switchyard.accelerator.errors import SimulatorError, UnknownNameError
from switchyard.accelerator.sim.bench import simulate_bench
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hardware import Instance, get_instance, list_instances
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.point import simulate_point

# Apart from the calibration tables in data/: not every model of these rows is in the catalog.
DATA = Path(__file__).resolve().parent / "data" / "neuron_2026"
FILES = {"neuron_benchmarks_2026.csv": False, "neuron_benchmarks_unpinned_2026.csv": True}  # name -> unpinned
TRN3_STAND_IN = "trn3-gen1-ultraserver"
_LENGTH = re.compile(r"^~?\s*(\d+(?:\.\d+)?)\s*([kK])?(?:-token)?(?![\d.]*\s*-\s*\d)")
_NOT_A_PROMPT = ("seq_len", "cte", "max_context_length", "dataset", "not stated", "bucket")


@dataclass(frozen=True, slots=True)
class FidelityRow:
    """One published measurement the simulator can run, with its free text parsed."""

    label: str  # file:line
    model: str
    instance: str  # catalog name the row runs on
    group: str
    tp: int
    closed_loop: bool  # True: closed loop at `load`; False: static batch of `load`
    load: int
    max_batch: int
    input_len: int
    output_len: int
    weights: str
    statistic: str  # p50, mean, p99, not stated, ...
    quality: str  # A, B or C
    ttft_ms: float | None
    tpot_ms: float | None
    output_tok_s: float | None
    approximations: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Skipped:
    """A row the simulator cannot run, with the reason (a category) and the text that caused it."""

    label: str
    reason: str
    detail: str


def first_int(text: str) -> int | None:
    """The first integer in `text` ("64 (LNC=2)" -> 64), or None."""
    m = re.search(r"\d+", text)
    return int(m.group()) if m else None


def parse_length(text: str) -> int | None:
    """Tokens of an `input_len`/`output_len` cell ("4k" -> 4096), or None when the cell states no length."""
    t = text.strip()
    if t.lower().startswith(_NOT_A_PROMPT):
        return None
    m = _LENGTH.match(t)
    if not m:
        return None
    value = float(m.group(1)) * (1024 if m.group(2) else 1)
    return int(value) if value >= 1 else None


def classify_load(text: str, batch_text: str) -> tuple[bool, int] | str:
    """(closed_loop, concurrency or static batch) of a row, or the skip reason."""
    t = text.lower()
    if "static" in t:
        m = re.search(r"batch\s*=\s*(\d+)", t) or re.match(r"\s*(\d+)", batch_text)
        return (False, int(m.group(1))) if m else "static batch size not stated"
    if "asynchronous@" in t:
        return "open-loop rate (not a closed loop)"
    if re.search(r"\d+\s*-\s*\d+", t):
        return "concurrency is a range"
    if "synchronous" in t or "single stream" in t or "single request" in t:
        return (True, 1)
    m = re.search(r"concurrency\s*[= ]\s*(\d+)|(\d+)\s*concurrent|(\d+)\s*(?:max\s+)?users", t)
    if m:
        return (True, int(next(g for g in m.groups() if g)))
    return "load (concurrency or static batch) not stated"


def _resolve_instance(text: str) -> tuple[Instance, bool] | None:
    """(instance, is the Trainium3 stand-in) for an `instance` cell, or None."""
    names = sorted((i.name for i in list_instances()), key=len, reverse=True)
    for name in names:
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", text):
            return get_instance(name), False
    if re.search(r"trn3|trainium\s*3", text, re.IGNORECASE):
        return get_instance(TRN3_STAND_IN), True
    return None


def _group(inst: Instance, unpinned: bool) -> str:
    if inst.chip.name == "Trainium3":
        family = "trn3"
    elif inst.name.startswith(("inf2", "trn1")):
        family = inst.name[:4]
    else:
        family = inst.name
    return f"{family} (unpinned)" if unpinned else family


def _weights(text: str) -> str:
    t = text.lower()
    stored_fp8 = "fp8" in t and not re.search(r"dequantiz|upcast|extraction", t)
    return "fp8" if stored_fp8 else "bf16"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_row(raw: dict[str, str], label: str, *, unpinned: bool = False) -> FidelityRow | Skipped:
    """Parse one CSV row (module docstring: the rules); a Skipped with the first reason it cannot run."""

    def skip(reason: str, detail: str) -> Skipped:
        return Skipped(label, reason, detail)

    try:
        model = get_model(raw["model"]).name
    except UnknownNameError:
        return skip("model not in the simulator's catalog", raw["model"])
    resolved = _resolve_instance(raw["instance"])
    if resolved is None:
        return skip("instance not resolvable", raw["instance"])
    inst, stand_in = resolved
    approx = ["trn3 stand-in"] if stand_in else []
    tp_text = raw["tp"]
    tp = first_int(tp_text)
    if tp is None:
        return skip("tp not stated", tp_text)
    dp = re.search(r"DP=(\d+)", tp_text)
    if dp and int(dp.group(1)) > 1:
        return skip("data parallel (DP>1): the bench runs one replica", tp_text)
    lnc = re.search(r"LNC=(\d+)", tp_text)
    if lnc and int(lnc.group(1)) == 1 and inst.chip.lnc > 1:
        return skip("LNC=1 (the simulator's Trainium ranks are LNC=2)", tp_text)
    ep = re.search(r"(?:\bEP|moe_ep)=(\d+)", tp_text)
    if ep and int(ep.group(1)) > 1:
        approx.append("EP")
    load = classify_load(raw["concurrency_or_static"], raw["batch"])
    if isinstance(load, str):
        return skip(load, raw["concurrency_or_static"])
    input_len, output_len = parse_length(raw["input_len"]), parse_length(raw["output_len"])
    if input_len is None:
        return skip("input length unknown", raw["input_len"])
    if output_len is None:
        return skip("output length unknown", raw["output_len"])
    if raw["speculative"].strip().lower() != "none":
        return skip("speculative decoding", raw["speculative"])
    if raw["prefix_caching"].strip().lower().startswith("on"):
        return skip("prefix caching on", raw["prefix_caching"])
    if not raw["disaggregated"].strip().lower().startswith("off"):
        return skip("disaggregated", raw["disaggregated"])
    ttft, tpot, tok_s = (_number(raw[c]) for c in ("ttft_p50_ms", "tpot_p50_ms", "output_tok_s"))
    if ttft is None and tpot is None and tok_s is None:
        return skip("no measured TTFT/TPOT/tok/s", "")
    closed_loop, n = load
    batch_cap = re.match(r"\s*(\d+)", raw["batch"])
    stat = re.search(r"STAT=([a-z0-9]+(?: stated| run)?)", raw["notes"])
    quality = re.search(r"\[Q=([ABC])\]", raw["notes"])
    return FidelityRow(
        label=label,
        model=model,
        instance=inst.name,
        group=_group(inst, unpinned),
        tp=tp,
        closed_loop=closed_loop,
        load=n,
        max_batch=int(batch_cap.group(1)) if batch_cap else n,
        input_len=input_len,
        output_len=output_len,
        weights=_weights(raw["weights"]),
        statistic=stat.group(1) if stat else "p50",
        quality=quality.group(1) if quality else "?",
        ttft_ms=ttft,
        tpot_ms=tpot,
        output_tok_s=tok_s,
        approximations=tuple(approx),
    )


def read_rows(data_dir: Path = DATA) -> tuple[list[FidelityRow], list[Skipped]]:
    """Every row of the two 2026 files, parsed: (usable, skipped)."""
    usable: list[FidelityRow] = []
    skipped: list[Skipped] = []
    for name, unpinned in FILES.items():
        with (data_dir / name).open(newline="", encoding="utf-8") as f:
            for line, raw in enumerate(csv.DictReader(f), start=2):
                parsed = parse_row(raw, f"{name.removesuffix('.csv')}:{line}", unpinned=unpinned)
                if isinstance(parsed, FidelityRow):
                    usable.append(parsed)
                else:
                    skipped.append(parsed)
    return usable, skipped


@dataclass(frozen=True, slots=True)
class Prediction:
    """What the simulator predicts for one row (latencies in ms, at the row's statistic)."""

    ttft_ms: float
    tpot_ms: float
    output_tok_s: float


def predict(row: FidelityRow) -> Prediction | Skipped:
    """Run the row: simulate_bench for a closed loop, simulate_point for a static batch."""
    try:
        if not row.closed_loop:
            p = simulate_point(row.model, row.instance, row.tp, row.load, row.input_len, row.output_len, row.weights)
            return Prediction(p.ttft_ms, p.tpot_ms, p.output_tokens_per_s)
        b = simulate_bench(
            row.model,
            row.instance,
            row.tp,
            requests=max(50, 8 * row.load),
            input_len=row.input_len,
            output_len=row.output_len,
            concurrency=row.load,
            weights=row.weights,
            config=EngineConfig(max_batch=max(1, row.max_batch), prefix_caching=False),
        )
    except SimulatorError as e:
        return Skipped(row.label, f"deployment rejected ({type(e).__name__})", str(e)[:120])
    if b.measured == b.rejected:
        return Skipped(row.label, "no request fits the replica's KV cache", "")
    q = "p99" if row.statistic == "p99" else "p50"
    return Prediction(b.ttft_ms[q], b.itl_ms[q], b.output_tokens_per_s)


def signed_error_pct(predicted: float, measured: float | None) -> float | None:
    """(predicted - measured) / measured in %, or None without a measurement."""
    return None if measured is None or measured <= 0 else 100.0 * (predicted - measured) / measured


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:+.0f}"


def _measured(value: float | None, width: int, digits: int) -> str:
    return f"{'':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def _stats(errors: list[float]) -> str:
    """n, median and p90 of |error| (in %), 21 characters wide."""
    if not errors:
        return f"{0:>7} {'-':>6} {'-':>6}"
    a = np.abs(np.asarray(errors))
    return f"{len(a):>7} {np.median(a):>6.0f} {np.percentile(a, 90):>6.0f}"


def main() -> None:
    started = time.perf_counter()
    usable, skipped = read_rows()
    total = len(usable) + len(skipped)
    used: Counter[str] = Counter()
    errors: dict[str, dict[str, list[float]]] = {}
    print(
        f"{'row':<34} {'group':<24} {'model':<34} {'tp':>3} {'load':>5} {'in/out':>11} {'stat':<10} Q "
        f"{'TTFT ms':>8} {'err%':>5} {'TPOT ms':>7} {'err%':>5} {'tok/s':>7} {'err%':>5}  approx"
    )
    for row in usable:
        pred = predict(row)
        if isinstance(pred, Skipped):
            skipped.append(pred)
            continue
        errs = {
            "ttft": signed_error_pct(pred.ttft_ms, row.ttft_ms),
            "tpot": signed_error_pct(pred.tpot_ms, row.tpot_ms),
            "tok_s": signed_error_pct(pred.output_tok_s, row.output_tok_s),
        }
        used[row.group] += 1
        group = errors.setdefault(row.group, {"ttft": [], "tpot": [], "tok_s": []})
        for k, v in errs.items():
            if v is not None:
                group[k].append(v)
        load = f"{'c' if row.closed_loop else 'b'}={row.load}"
        print(
            f"{row.label:<34} {row.group:<24} {row.model[-34:]:<34} {row.tp:>3} {load:>5} "
            f"{f'{row.input_len}/{row.output_len}':>11} {row.statistic:<10} {row.quality} "
            f"{_measured(row.ttft_ms, 8, 1)} {_cell(errs['ttft']):>5} {_measured(row.tpot_ms, 7, 2)} "
            f"{_cell(errs['tpot']):>5} {_measured(row.output_tok_s, 7, 1)} {_cell(errs['tok_s']):>5}  "
            f"{','.join(row.approximations)}"
        )
    print("\nskipped rows (first reason, then the text that caused it):")
    for s in skipped:
        print(f"  {s.label:<34} {s.reason}: {s.detail[:90]}")
    print("\n|error| in % per group (n: rows with that measurement; med and p90 of |predicted/measured - 1|)")
    header = "  ".join(f"{f'{name} n':>7} {'med':>6} {'p90':>6}" for name in ("TTFT", "TPOT", "tok/s"))
    print(f"{'group':<24} {'rows':>4}  {header}")
    for name in sorted(errors):
        g = errors[name]
        print(f"{name:<24} {used[name]:>4}  " + "  ".join(_stats(g[k]) for k in ("ttft", "tpot", "tok_s")))
    print(f"\nused {sum(used.values())} of {total} rows; skipped {len(skipped)} (first reason):")
    for reason, n in Counter(s.reason for s in skipped).most_common():
        print(f"  {n:>4}  {reason}")
    print(f"\n({time.perf_counter() - started:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
