"""How faithful is `simulate bench` on the published 2026 Neuron rows? Predicted vs measured, per row and per group.

    .venv/bin/python benchmarks/bench_fidelity.py            # the committed coefficients, every usable row
    .venv/bin/python benchmarks/bench_fidelity.py --refit    # the per-generation fit, cross-validated (read-only)
    .venv/bin/python benchmarks/bench_fidelity.py --write-serving-rows   # the typed table `calibrate` fits it on

Reads `benchmarks/data/neuron_2026/neuron_benchmarks_2026.csv` and `neuron_benchmarks_unpinned_2026.csv`
(`benchmarks/data/README.md`), parses each row's free-text columns into a FidelityRow, or a Skipped with the first
reason it cannot be run, runs every usable row once and prints the signed error (predicted - measured) / measured
in % of TTFT, TPOT (the bench's ITL) and output tokens per second, then per group the rows used and the median and
p90 of |error|, then the skipped rows counted per reason. Nothing is fitted here: the simulator's committed
coefficients are used as they are (their trn2 decode is fitted on this script's point-mode trn2 rows, below, so
those rows' TPOT is in sample; tests/accelerator/test_fidelity_limits.py holds the summary per group to the limits
docs/simulator.md states).

`--refit` fits NxD Inference's coefficients per Neuron generation on the pinned rows that are point-mode
measurements (`calibration_row`: static batches and closed loops at concurrency 1; never the unpinned file, p99
rows or queued closed loops) with `sim/serving_calibration.py`, refits once per architecture with it left out,
and prints the refit's coefficients, its in-sample and leave-one-architecture-out errors on those rows, and the
whole table again with every row run on the refit that never saw its architecture (unpinned rows on the full
refit, which never saw them; generations with fewer than MIN_ARCHITECTURES architectures are not fitted and keep
the committed coefficients). It writes nothing. The fit is the one `calibrate` makes when given these rows:
`--write-serving-rows` writes the rows of the fitted generations, typed, to `sim/data/nxd_serving_rows_2026.csv`
(SERVING_ROWS; `fit` = "generation"), which `calibrate --data` reads beside the 2024-25 tables: the committed
calibration (docs/simulator.md, "Calibration" and "Refit on the 2026 rows").

Parsing rules (first failing check wins, in this order):
- model: the id as published must resolve through the simulator's catalog or alias table (sim/models.py).
- instance: the first catalog instance name written in the cell ("trn2 (README: trn2.48xlarge tested)" is
  trn2.48xlarge; trn3.48xlarge and trn3pd98.3xlarge are catalog instance types). A cell that names no instance
  type ("Trainium 3 (instance not named in file ...)") is skipped.
- tp: the cell's first integer. "DP=N" with N > 1 is skipped (the bench runs one replica, the rows measure N
  behind a proxy); "LNC=1" on a chip whose default is LNC=2 is skipped (the simulator's ranks are LNC=2 logical
  cores). "EP=N"/"moe_ep" with N > 1 runs expert-parallel (the experts whole on the TP ranks); an EP degree other
  than the TP degree is flagged "EP degree".
- load: "static" in `concurrency_or_static` makes a static batch (its "batch=N", else the `batch` cell's leading
  integer), run with simulate_point. Otherwise the row is a closed loop: guidellm "synchronous", "single
  stream" and "single request" at concurrency 1; "concurrency=N", "batch/concurrency N (vLLM serving)",
  "N concurrent" and guidellm "throughput; N users" at N. A range ("1-64"), an open-loop rate ("asynchronous@R")
  or no number is skipped. The engine's max_batch is the `batch` cell's leading integer (vLLM's max-num-seqs)
  when it has one, else the concurrency; the engine's prefix caching is off (rows with it on are skipped).
- lengths: a leading number, "k" meaning 1,024 ("4k" is 4,096; "~1500 (emulated)" and "1500 (+-150)" are 1,500;
  "7-token prompt; ..." is 7). Compiled buckets ("seq_len 4096", "CTE bucket 128", "max_context_length"),
  datasets, "dataset-defined", "not stated" and ranges ("24-32") are unknown lengths.
- rows with speculative decoding, prefix caching on, or disaggregation are skipped (the bench models none of the
  latter two; a draft model's speculative decoding it models, but no row states the acceptance rate it ran at).
- weights: "bf16" when the cell starts with it and stores no FP8 (dequantised/upcast FP8 checkpoints are bf16),
  "fp8" when FP8 is stored (mixed FP8-expert rows included), bf16 when not stated.
- statistic: the notes' "STAT=" (mean, p99, not stated), else p50. A p99 row is compared with the predicted p99,
  every other row with the predicted p50 (the bench reports percentiles, not means). Output tokens per second
  are compared with the bench's aggregate rate, or with its share per request (aggregate / concurrency or
  batch) when the notes call the cell one request's rate ("output_tok_s = per-request ...", "tok/s P50 ... per
  request", "(per request)").
- group: the instance family (trn2.3xlarge, trn2.48xlarge, trn3, inf2, trn1), "(unpinned)" for the second file.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from switchyard.accelerator.errors import SimulatorError, UnknownNameError
from switchyard.accelerator.sim.bench import simulate_bench
from switchyard.accelerator.sim.calibration import BenchmarkRow, predict_rows
from switchyard.accelerator.sim.calibration_data import NXD_INFERENCE
from switchyard.accelerator.sim.costmodel import Coefficients
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hardware import Instance, get_instance, list_instances
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.point import simulate_point
from switchyard.accelerator.sim.serving_calibration import MIN_ARCHITECTURES, ServingFit, architecture, fit_serving

# Apart from the calibration tables in data/: not every model of these rows is in the catalog.
DATA = Path(__file__).resolve().parent / "data" / "neuron_2026"
# The typed point-mode rows `calibrate` fits NxD Inference per generation on (--write-serving-rows).
SERVING_ROWS = (
    Path(__file__).resolve().parents[1] / "accelerator/switchyard/accelerator/sim/data/nxd_serving_rows_2026.csv"
)
FILES = {"neuron_benchmarks_2026.csv": False, "neuron_benchmarks_unpinned_2026.csv": True}  # name -> unpinned
_LENGTH = re.compile(r"^~?\s*(\d+(?:\.\d+)?)\s*([kK])?(?:-token)?(?![\d.]*\s*-\s*\d)")
_NOT_A_PROMPT = ("seq_len", "cte", "max_context_length", "dataset", "not stated", "bucket")
# Notes that call the output_tok_s cell one request's rate ("output_tok_s = per-request tok/s P50 (aggregate
# ~= conc x per-request)", "tok/s P50 / TPOT P50 per request", "... (per request)").
_PER_REQUEST = re.compile(r"output_tok_s = [^.;]*per[- ]request|tok/s P50[^.;]*per request|\(per request\)", re.I)


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
    tok_s_per_request: bool  # the notes say output_tok_s is one request's rate, not the aggregate
    expert_parallel: bool  # EP=N (N > 1): the experts whole on the TP ranks
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


def _resolve_instance(text: str) -> Instance | None:
    """The catalog instance an `instance` cell names first, or None."""
    names = sorted((i.name for i in list_instances()), key=len, reverse=True)
    for name in names:
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", text):
            return get_instance(name)
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
    inst = _resolve_instance(raw["instance"])
    if inst is None:
        return skip("instance not named", raw["instance"])
    approx: list[str] = []
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
    expert_parallel = bool(ep and int(ep.group(1)) > 1)
    if ep and expert_parallel and int(ep.group(1)) != tp:
        approx.append("EP degree")  # the simulator's expert parallelism spreads the experts over all TP ranks
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
        tok_s_per_request=bool(_PER_REQUEST.search(raw["notes"])),
        expert_parallel=expert_parallel,
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


def predict(row: FidelityRow, coefficients: Coefficients | None = None) -> Prediction | Skipped:
    """Run the row: simulate_bench for a closed loop, simulate_point for a static batch (on `coefficients` if
    given, else the instance's committed calibration)."""
    # Both report the aggregate rate; a row that publishes one request's rate gets the aggregate's share.
    share = row.load if row.tok_s_per_request else 1
    try:
        if not row.closed_loop:
            p = simulate_point(
                row.model,
                row.instance,
                row.tp,
                row.load,
                row.input_len,
                row.output_len,
                row.weights,
                coefficients,
                expert_parallel=row.expert_parallel,
            )
            return Prediction(p.ttft_ms, p.tpot_ms, p.output_tokens_per_s / share)
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
            coefficients=coefficients,
            expert_parallel=row.expert_parallel,
        )
    except SimulatorError as e:
        return Skipped(row.label, f"deployment rejected ({type(e).__name__})", str(e)[:120])
    if b.measured == b.rejected:
        return Skipped(row.label, "no request fits the replica's KV cache", "")
    q = "p99" if row.statistic == "p99" else "p50"
    return Prediction(b.ttft_ms[q], b.itl_ms[q], b.output_tokens_per_s / share)


def calibration_row(row: FidelityRow) -> BenchmarkRow | None:
    """The row as a point-mode calibration row (serving_calibration's typed input), or None.

    A static batch is itself; a closed loop at concurrency 1 is a batch of one whose decode graph is compiled for
    the engine's max_batch (vLLM's max-num-seqs). Closed loops at higher concurrency are not (their TTFT queues
    and their ITL carries the other requests' prefills: only the engine predicts them), nor are p99 rows,
    unpinned rows (kept as cross-checks), expert-parallel rows (calibration rows are tensor-parallel) or rows
    without a TTFT or TPOT.
    """
    if row.group.endswith("(unpinned)") or row.statistic == "p99" or (row.ttft_ms is None and row.tpot_ms is None):
        return None
    if row.expert_parallel:
        return None
    if row.closed_loop and row.load != 1:
        return None
    return BenchmarkRow(
        model=row.model,
        instance=row.instance,
        tp=row.tp,
        batch=row.load,
        input_len=row.input_len,
        output_len=row.output_len,
        weights=row.weights,
        ttft_ms=float("nan") if row.ttft_ms is None else row.ttft_ms,
        tpot_ms=float("nan") if row.tpot_ms is None else row.tpot_ms,
        stack=NXD_INFERENCE,
        compiled_batch=row.max_batch if row.max_batch > row.load else 0,
        published_stack=NXD_INFERENCE,
    )


def serving_rows(usable: list[FidelityRow]) -> list[tuple[FidelityRow, BenchmarkRow]]:
    """The point-mode rows (calibration_row) of the generations whose rows cover MIN_ARCHITECTURES architectures."""
    pairs = [(r, c) for r in usable if (c := calibration_row(r)) is not None]
    archs: dict[str, set[str]] = {}
    for _, c in pairs:
        archs.setdefault(c.generation, set()).add(architecture(c.model))
    return [(r, c) for r, c in pairs if len(archs[c.generation]) >= MIN_ARCHITECTURES]


def write_serving_rows(usable: list[FidelityRow], path: Path = SERVING_ROWS) -> int:
    """Write serving_rows() in the columns calibration.read_benchmarks reads, `fit` = "generation"; the row count."""
    columns = [
        *("model", "instance", "tp", "batch", "input_len", "output_len", "weights", "ttft_p50_ms", "tpot_p50_ms"),
        *("output_tok_s", "stack", "source", "compiled_batch", "fit"),
    ]
    rows = serving_rows(usable)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for r, c in rows:
            name, _, line = r.label.partition(":")
            writer.writerow(
                {
                    "model": c.model,
                    "instance": c.instance,
                    "tp": c.tp,
                    "batch": c.batch,
                    "input_len": c.input_len,
                    "output_len": c.output_len,
                    "weights": c.weights,
                    "ttft_p50_ms": "" if r.ttft_ms is None else r.ttft_ms,
                    "tpot_p50_ms": "" if r.tpot_ms is None else r.tpot_ms,
                    "output_tok_s": "" if r.output_tok_s is None else r.output_tok_s,
                    "stack": c.stack,
                    "source": f"benchmarks/data/neuron_2026/{name}.csv line {line} (its source column)",
                    "compiled_batch": c.compiled_batch,
                    "fit": "generation",
                }
            )
    return len(rows)


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
    median, p90 = median_p90(errors)
    return f"{len(errors):>7} {median:>6.0f} {p90:>6.0f}"


Errors = dict[str, dict[str, list[float]]]  # group -> measurement -> signed errors in %


def evaluate(
    usable: list[FidelityRow], coefficients_of: Callable[[FidelityRow], Coefficients | None] | None = None
) -> tuple[list[tuple[FidelityRow, dict[str, float | None]]], list[Skipped]]:
    """Every usable row's signed errors (ttft, tpot, tok_s), and the rows the simulator refused.

    `coefficients_of` gives a row's cost model; without it every row runs on the committed calibration.
    """
    done: list[tuple[FidelityRow, dict[str, float | None]]] = []
    refused: list[Skipped] = []
    for row in usable:
        pred = predict(row, coefficients_of(row) if coefficients_of else None)
        if isinstance(pred, Skipped):
            refused.append(pred)
            continue
        errs = {
            "ttft": signed_error_pct(pred.ttft_ms, row.ttft_ms),
            "tpot": signed_error_pct(pred.tpot_ms, row.tpot_ms),
            "tok_s": signed_error_pct(pred.output_tok_s, row.output_tok_s),
        }
        done.append((row, errs))
    return done, refused


def print_rows(done: list[tuple[FidelityRow, dict[str, float | None]]]) -> None:
    print(
        f"{'row':<34} {'group':<24} {'model':<34} {'tp':>3} {'load':>5} {'in/out':>11} {'stat':<10} Q "
        f"{'TTFT ms':>8} {'err%':>5} {'TPOT ms':>7} {'err%':>5} {'tok/s':>7} {'err%':>5}  approx"
    )
    for row, errs in done:
        load = f"{'c' if row.closed_loop else 'b'}={row.load}"
        print(
            f"{row.label:<34} {row.group:<24} {row.model[-34:]:<34} {row.tp:>3} {load:>5} "
            f"{f'{row.input_len}/{row.output_len}':>11} {row.statistic:<10} {row.quality} "
            f"{_measured(row.ttft_ms, 8, 1)} {_cell(errs['ttft']):>5} {_measured(row.tpot_ms, 7, 2)} "
            f"{_cell(errs['tpot']):>5} {_measured(row.output_tok_s, 7, 1)} {_cell(errs['tok_s']):>5}  "
            f"{','.join(row.approximations)}"
        )


def errors_by_group(done: list[tuple[FidelityRow, dict[str, float | None]]]) -> Errors:
    """Signed errors of `evaluate`'s rows per group and measurement (ttft, tpot, tok_s); unmeasured ones left out."""
    errors: Errors = {}
    for row, errs in done:
        group = errors.setdefault(row.group, {"ttft": [], "tpot": [], "tok_s": []})
        for k, v in errs.items():
            if v is not None:
                group[k].append(v)
    return errors


def median_p90(errors: list[float]) -> tuple[float, float]:
    """Median and p90 of |error| (in %, as the summary prints them)."""
    a = np.abs(np.asarray(errors))
    return float(np.median(a)), float(np.percentile(a, 90))


def print_summary(done: list[tuple[FidelityRow, dict[str, float | None]]], title: str) -> None:
    """Per group: rows used, then n, median and p90 of |error| for TTFT, TPOT and output tok/s."""
    used: Counter[str] = Counter(row.group for row, _ in done)
    errors = errors_by_group(done)
    print(f"\n{title}")
    header = "  ".join(f"{f'{name} n':>7} {'med':>6} {'p90':>6}" for name in ("TTFT", "TPOT", "tok/s"))
    print(f"{'group':<24} {'rows':>4}  {header}")
    for name in sorted(errors):
        g = errors[name]
        print(f"{name:<24} {used[name]:>4}  " + "  ".join(_stats(g[k]) for k in ("ttft", "tpot", "tok_s")))


def _point_errors(fit: ServingFit, rows: list[BenchmarkRow], groups: list[str]) -> None:
    """In-sample and leave-one-architecture-out errors of the refit on its own (point-mode) rows, per group."""
    table: dict[str, dict[str, list[float]]] = {}
    for r, name in zip(rows, groups, strict=True):
        g = table.setdefault(name, {"ttft": [], "tpot": [], "ttft_cv": [], "tpot_cv": []})
        (full,) = predict_rows([r], fit.coefficients[r.generation])
        held = fit.for_row(r.generation, r.model)
        assert held is not None  # every architecture of a fitted generation has its refit
        (cv,) = predict_rows([r], held)
        for k, e in (
            ("ttft", full.ttft_err),
            ("tpot", full.tpot_err),
            ("ttft_cv", cv.ttft_err),
            ("tpot_cv", cv.tpot_err),
        ):
            g[k].append(100 * e)

    def cols(errors: list[float]) -> str:
        v = np.abs(np.array([x for x in errors if np.isfinite(x)]))
        return (
            f"{v.size:>6} {np.median(v):>5.0f} {np.percentile(v, 90):>5.0f}" if v.size else f"{0:>6} {'-':>5} {'-':>5}"
        )

    print("\npoint-mode rows of the refit, |error| in %: in sample, then leaving the row's architecture out")
    print(
        f"{'group':<24} {'rows':>4}  {'TTFT n':>6} {'med':>5} {'p90':>5} {'cv n':>6} {'med':>5} {'p90':>5}  "
        f"{'TPOT n':>6} {'med':>5} {'p90':>5} {'cv n':>6} {'med':>5} {'p90':>5}"
    )
    for name in sorted(table):
        g = table[name]
        print(
            f"{name:<24} {groups.count(name):>4}  {cols(g['ttft'])} {cols(g['ttft_cv'])}  "
            f"{cols(g['tpot'])} {cols(g['tpot_cv'])}"
        )


def refit(usable: list[FidelityRow]) -> None:
    """Fit NxD Inference per generation on the pinned rows (serving_calibration) and report it cross-validated."""
    pairs = [(r, c) for r in usable if (c := calibration_row(r)) is not None]
    rows = [c for _, c in pairs]
    fit = fit_serving(rows)
    print("refit of NxD Inference on the pinned 2026 rows (per generation; the committed coefficients are untouched)")
    for gen in sorted(fit.unfitted):
        archs = sorted({architecture(r.model) for r in rows if r.generation == gen})
        print(f"\n{gen}: not fitted ({len(archs)} architecture(s) < {MIN_ARCHITECTURES}: {', '.join(archs)})")
    for gen, coeffs in fit.coefficients.items():
        print(f"\n{gen}: {sum(r.generation == gen for r in rows)} rows, {len(fit.architectures[gen])} architectures")
        for phase in ("prefill", "decode"):
            quoted = getattr(coeffs, phase).describe()
            print(f"  {phase:<8}" + "  ".join(f"{k} {v:.4g}" for k, v in quoted.items()))
    fitted = [i for i, r in enumerate(rows) if r.generation in fit.coefficients]
    _point_errors(fit, [rows[i] for i in fitted], [pairs[i][0].group for i in fitted])

    def held_out(row: FidelityRow) -> Coefficients | None:
        return fit.for_row(get_instance(row.instance).calibration_group, row.model)

    done, refused = evaluate(usable, held_out)
    print_summary(
        done,
        "simulate bench/point with each row's architecture left out of the refit (unpinned rows: the full fit, which "
        "never saw them; unfitted generations: the committed coefficients); |error| in %",
    )
    print(f"\n{len(done)} rows; {len(refused)} refused")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--refit", action="store_true", help="refit NxD Inference on these rows, cross-validated")
    parser.add_argument(
        "--write-serving-rows",
        action="store_true",
        help=f"write the typed rows calibrate fits NxD Inference per generation on to {SERVING_ROWS.name}",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    usable, skipped = read_rows()
    if args.write_serving_rows:
        print(f"wrote {write_serving_rows(usable)} rows to {SERVING_ROWS}")
        return
    if args.refit:
        refit(usable)
        print(f"\n({time.perf_counter() - started:.1f} s)", file=sys.stderr)
        return
    total = len(usable) + len(skipped)
    done, refused = evaluate(usable)
    skipped += refused
    print_rows(done)
    print("\nskipped rows (first reason, then the text that caused it):")
    for s in skipped:
        print(f"  {s.label:<34} {s.reason}: {s.detail[:90]}")
    print_summary(
        done, "|error| in % per group (n: rows with that measurement; med and p90 of |predicted/measured - 1|)"
    )
    print(f"\nused {len(done)} of {total} rows; skipped {len(skipped)} (first reason):")
    for reason, n in Counter(s.reason for s in skipped).most_common():
        print(f"  {n:>4}  {reason}")
    print(f"\n({time.perf_counter() - started:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
