"""The row parser of benchmarks/bench_fidelity.py: free-text cells of the 2026 Neuron tables into runnable rows."""

from __future__ import annotations

import csv

import pytest

from benchmarks.bench_fidelity import (
    DATA,
    FILES,
    FidelityRow,
    Skipped,
    calibration_row,
    classify_load,
    first_int,
    parse_length,
    parse_row,
    read_rows,
)

# A published closed-loop row (unpinned file, line 3), as csv.DictReader yields it.
SERVING_ROW = {
    "model": "Qwen/Qwen2.5-7B-Instruct",
    "instance": "trn2.48xlarge (one task per TP group; 16 tasks in parallel per wave)",
    "tp": "1 (LNC=2)",
    "batch": "2",
    "concurrency_or_static": "batch/concurrency 2 (vLLM serving)",
    "input_len": "4k",
    "output_len": "300",
    "weights": "not stated",
    "ttft_p50_ms": "716.11",
    "tpot_p50_ms": "71.79",
    "output_tok_s": "25.8",
    "prefix_caching": "off",
    "speculative": "none",
    "disaggregated": "off",
    "stack": "vLLM v0.13.0 + neuronx-distributed-inference",
    "client": "not named",
    "source": "search-index file id 51983653325",
    "notes": "[Q=C] UNPINNED. STAT=mean (Mean TTFT / Mean ITL).",
}


@pytest.mark.parametrize(
    ("cell", "tokens"),
    [
        ("4k", 4096),
        ("64k", 65536),
        ("128", 128),
        ("1500 (+-150)", 1500),
        ("~1500 (emulated)", 1500),
        ("7-token prompt; bucket seq_len 640", 7),
        ("512 requested (reported number_output_tokens 558, p99 listing)", 512),
        ("dataset-defined", None),
        ("not stated", None),
        ("seq_len 4096", None),
        ("CTE bucket 128", None),
        ("24-32", None),
    ],
)
def test_a_length_cell_reads_as_tokens_or_as_unknown(cell: str, tokens: int | None) -> None:
    assert parse_length(cell) == tokens


def test_tp_is_the_first_integer_of_its_cell() -> None:
    assert first_int("64 (LNC=2)") == 64
    assert first_int("8 per replica x DP=3") == 8
    assert first_int("not restated") is None


def test_a_static_batch_and_a_serving_concurrency_are_told_apart() -> None:
    assert classify_load("static batch=4 (NxDI direct)", "4") == (False, 4)
    assert classify_load("static batch (NxDI direct)", "8 (--max-num-seqs 8)") == (False, 8)
    assert classify_load("batch/concurrency 2 (vLLM serving)", "2") == (True, 2)
    assert classify_load("concurrency=4 (vLLM)", "4 (max_num_seqs=4)") == (True, 4)
    assert classify_load("guidellm throughput (32 concurrent users)", "32 (seq 4096)") == (True, 32)
    assert classify_load("guidellm synchronous; 128 max users", "32") == (True, 1)
    assert classify_load("concurrency 1-64 (RPS flat)", "not stated") == "concurrency is a range"
    assert isinstance(classify_load("not stated (per-request metric)", "1"), str)


def test_a_serving_row_parses_into_a_closed_loop_record() -> None:
    row = parse_row(SERVING_ROW, "unpinned:3", unpinned=True)
    assert isinstance(row, FidelityRow)
    assert (row.instance, row.group, row.tp, row.closed_loop, row.load, row.max_batch) == (
        "trn2.48xlarge",
        "trn2.48xlarge (unpinned)",
        1,
        True,
        2,
        2,
    )
    assert (row.input_len, row.output_len, row.weights) == (4096, 300, "bf16")
    assert (row.ttft_ms, row.tpot_ms, row.output_tok_s) == (716.11, 71.79, 25.8)
    assert (row.statistic, row.quality) == ("mean", "C")


def test_a_static_row_parses_into_a_static_batch() -> None:
    raw = SERVING_ROW | {"concurrency_or_static": "static batch=8 (NxDI direct)", "batch": "8"}
    row = parse_row(raw, "x:1")
    assert isinstance(row, FidelityRow)
    assert (row.closed_loop, row.load, row.group) == (False, 8, "trn2.48xlarge")


def test_a_per_request_rate_is_told_apart_from_an_aggregate_one() -> None:
    per_request = "[Q=B] output_tok_s = per-request tok/s P50 (aggregate ~= conc x per-request). E2E P50 2465.7 ms."
    rows = {
        notes: parse_row(SERVING_ROW | {"notes": notes}, "x:1")
        for notes in (per_request, "[Q=B] tok/s P50 / TPOT P50 per request", "[Q=B] output_tok_s = aggregate TPS")
    }
    assert [isinstance(r, FidelityRow) and r.tok_s_per_request for r in rows.values()] == [True, True, False]


def test_a_row_with_dataset_defined_lengths_is_skipped_with_its_reason() -> None:
    skipped = parse_row(SERVING_ROW | {"output_len": "dataset-defined"}, "x:1")
    assert skipped == Skipped("x:1", "output length unknown", "dataset-defined")


def test_a_trainium3_row_runs_on_the_instance_type_it_names() -> None:
    raw = SERVING_ROW | {"model": "Qwen/Qwen3-30B-A3B", "instance": "trn3.48xlarge (16 NeuronCores)", "tp": "8 (EP=8)"}
    row = parse_row(raw, "x:1")
    assert isinstance(row, FidelityRow)
    assert (row.instance, row.group, row.approximations) == ("trn3.48xlarge", "trn3", ())
    assert row.expert_parallel  # TP8/EP8: the experts whole on the eight ranks
    small = parse_row(SERVING_ROW | {"instance": "trn3pd98.3xlarge", "tp": "4 (LNC=2, EP=1)"}, "x:2")
    assert isinstance(small, FidelityRow)
    assert (small.instance, small.group) == ("trn3pd98.3xlarge", "trn3")


def test_a_row_that_names_no_instance_type_is_skipped() -> None:
    skipped = parse_row(SERVING_ROW | {"instance": "Trainium 3 (instance not named in file)"}, "x:1")
    assert isinstance(skipped, Skipped)
    assert skipped.reason == "instance not named"


def test_data_parallel_and_lnc1_rows_are_skipped() -> None:
    dp = parse_row(SERVING_ROW | {"tp": "8 per replica x DP=3"}, "x:1")
    lnc1 = parse_row(SERVING_ROW | {"tp": "8 (LNC=1)"}, "x:2")
    assert isinstance(dp, Skipped)
    assert "DP>1" in dp.reason
    assert isinstance(lnc1, Skipped)
    assert "LNC=1" in lnc1.reason


def test_every_row_of_the_repository_files_is_usable_or_skipped_with_a_reason() -> None:
    usable, skipped = read_rows()
    rows = 0
    for name in FILES:
        with (DATA / name).open(newline="", encoding="utf-8") as f:
            rows += sum(1 for _ in csv.DictReader(f))
    assert rows == 312 + 37
    assert len(usable) + len(skipped) == rows
    assert usable, "some published rows must be runnable"
    assert all(s.reason for s in skipped)
    assert all(r.tp >= 1 and r.load >= 1 and r.input_len >= 1 and r.output_len >= 1 for r in usable)


def test_static_and_single_stream_rows_become_calibration_rows_and_queued_ones_do_not() -> None:
    static = parse_row(SERVING_ROW | {"concurrency_or_static": "static batch=4 (NxDI direct)", "batch": "4"}, "x:1")
    single = parse_row(SERVING_ROW | {"concurrency_or_static": "concurrency=1 (vLLM)", "batch": "8"}, "x:2")
    queued = parse_row(SERVING_ROW | {"concurrency_or_static": "concurrency=4 (vLLM)", "batch": "8"}, "x:3")
    unpinned = parse_row(SERVING_ROW, "x:4", unpinned=True)
    assert isinstance(static, FidelityRow)
    assert isinstance(single, FidelityRow)
    assert isinstance(queued, FidelityRow)
    assert isinstance(unpinned, FidelityRow)
    s, one = calibration_row(static), calibration_row(single)
    assert s is not None
    assert one is not None
    assert (s.batch, s.compiled_batch, s.ttft_ms, s.tpot_ms) == (4, 0, 716.11, 71.79)
    assert (one.batch, one.compiled_batch) == (1, 8)  # vLLM compiles decode for max-num-seqs
    assert calibration_row(queued) is None  # its TTFT queues behind the others: only the engine predicts it
    assert calibration_row(unpinned) is None  # unpinned rows are cross-checks, never fitted
