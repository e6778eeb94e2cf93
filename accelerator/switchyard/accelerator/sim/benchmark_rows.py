"""Published measurements the calibration fits: one row per model, instance, shape and software stack."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from switchyard.accelerator.sim.calibration_data import NXD_INFERENCE, canonical_stack, group_name, host_sampling
from switchyard.accelerator.sim.hardware import get_instance
from switchyard.accelerator.sim.models import model_aliases

__all__ = ["BenchmarkRow", "RowError", "architecture", "read_benchmarks"]


@dataclass(frozen=True, slots=True)
class BenchmarkRow:
    """One published measurement (a row of neuron_benchmarks*.csv or gpu_benchmarks.csv).

    `stack` is the software stack the row calibrates (canonical_stack of the published column, which
    `published_stack` keeps); a TTFT or TPOT the source does not give is NaN.
    """

    model: str
    instance: str
    tp: int
    batch: int
    input_len: int
    output_len: int
    weights: str
    ttft_ms: float
    tpot_ms: float
    stack: str = ""
    compiled_batch: int = 0  # batch the decode graph was compiled for (0: the batch's own bucket)
    published_stack: str = ""
    # A serving row (NxD Inference): fits its generation's own set (SERVING_FREE) on top of the cross-generation
    # one, which it does not enter; the table's optional `fit` column says "generation".
    per_generation: bool = False

    @property
    def generation(self) -> str:
        """Hardware generation (the instance's calibration group, e.g. trn1)."""
        return get_instance(self.instance).calibration_group

    @property
    def group(self) -> str:
        """Calibration group: generation and software stack, e.g. "trn1/transformers-neuronx 2.18.1"."""
        return group_name(self.generation, self.stack)

    @property
    def host_sampling(self) -> bool:
        return host_sampling(self.published_stack)

    @property
    def new_stack(self) -> bool:
        """Calibrated as NxD Inference (software shared across Neuron generations)."""
        return self.stack == NXD_INFERENCE


@dataclass(frozen=True, slots=True)
class RowError:
    """A row's predicted TTFT and TPOT beside what was published."""

    row: BenchmarkRow
    ttft_pred_ms: float
    tpot_pred_ms: float

    @property
    def ttft_err(self) -> float:
        return (self.ttft_pred_ms - self.row.ttft_ms) / self.row.ttft_ms

    @property
    def tpot_err(self) -> float:
        return (self.tpot_pred_ms - self.row.tpot_ms) / self.row.tpot_ms


def _number(text: str | None) -> float:
    return float(text) if text not in (None, "") else float("nan")


def read_benchmarks(*paths: str | Path) -> list[BenchmarkRow]:
    """Rows of benchmark CSVs with the columns of benchmarks/data/neuron_benchmarks.csv.

    Optional columns: `compiled_batch`, `fit` ("generation": BenchmarkRow.per_generation); an empty ttft_p50_ms or
    tpot_p50_ms is read as NaN.
    """
    rows = []
    for path in paths:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            rows += [
                BenchmarkRow(
                    model=r["model"],
                    instance=r["instance"],
                    tp=int(r["tp"]),
                    batch=int(r["batch"]),
                    input_len=int(r["input_len"]),
                    output_len=int(r["output_len"]),
                    weights="bf16" if r["weights"] == "fp16" else r["weights"],
                    ttft_ms=_number(r["ttft_p50_ms"]),
                    tpot_ms=_number(r["tpot_p50_ms"]),
                    stack=canonical_stack(r.get("stack", "")),
                    compiled_batch=int(r.get("compiled_batch") or 0),
                    published_stack=r.get("stack", ""),
                    per_generation=(r.get("fit") or "") == "generation",
                )
                for r in csv.DictReader(fh)
            ]
    return rows


def architecture(model_id: str) -> str:
    """The catalog architecture a published id resolves to (an alias's base, else the id itself)."""
    return model_aliases().get(model_id, model_id)
