from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.sim.calibration_data import load_coefficients
from switchyard.accelerator.sim.point import simulate_point

# The 2026 serving rows the committed calibration fits NxD Inference's decode on (docs/simulator.md, "Calibration")
SERVING_ROWS = (
    Path(__file__).resolve().parents[2] / "accelerator/switchyard/accelerator/sim/data/nxd_serving_rows_2026.csv"
)


def test_simulate_is_a_click_group_with_the_subcommands() -> None:
    assert isinstance(simulate, click.Group)
    assert simulate.name == "simulate"
    assert {"point", "calibrate", "run"} <= set(simulate.commands)


def test_point_prints_json_matching_the_library() -> None:
    args = [
        "point",
        "--model",
        "meta-llama/Llama-2-70b-hf",
        "--instance",
        "trn1.32xlarge",
        "--tp",
        "32",
        "--batch",
        "4",
        "--input-len",
        "1024",
        "--output-len",
        "1024",
        "--json",
    ]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    expected = simulate_point("meta-llama/Llama-2-70b-hf", "trn1.32xlarge", 32, 4, 1024, 1024)
    for key in ("ttft_ms", "tpot_ms", "output_tokens_per_s", "chip_seconds"):
        assert out[key] == expected.to_dict()[key]


def test_point_reports_unknown_names_and_impossible_configs() -> None:
    result = CliRunner().invoke(
        simulate,
        [
            "point",
            "--model",
            "meta-llama/Llama-2-70b",
            "--instance",
            "trn1.32xlarge",
            "--tp",
            "32",
            "--input-len",
            "8",
            "--output-len",
            "8",
        ],
    )
    assert result.exit_code == 1
    assert "Did you mean: meta-llama/Llama-2-70b-hf" in result.output
    result = CliRunner().invoke(
        simulate,
        [
            "point",
            "--model",
            "meta-llama/Llama-3.1-405B",
            "--instance",
            "inf2.xlarge",
            "--tp",
            "2",
            "--input-len",
            "8",
            "--output-len",
            "8",
        ],
    )
    assert result.exit_code == 1
    assert "do not fit" in result.output


def test_calibrate_writes_the_committed_coefficients(benchmarks_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "coeffs.json"
    data = [
        benchmarks_csv,
        *(benchmarks_csv.with_name(n) for n in ("neuron_benchmarks_2025.csv", "gpu_benchmarks.csv")),
        SERVING_ROWS,
    ]
    args = ["calibrate", *(a for d in data for a in ("--data", str(d))), "--out", str(out)]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    assert "leave_one_model_out" in result.output
    assert result.output.count("inf2.48xlarge") == 27 + 6
    assert "Trainium2 " in result.output
    assert "GPU / A100-80GB" in result.output
    fresh, committed = load_coefficients(out), load_coefficients()
    assert set(fresh) == set(committed)
    for group in fresh:
        for phase in ("prefill", "decode"):
            np.testing.assert_allclose(
                getattr(fresh[group], phase).as_array(), getattr(committed[group], phase).as_array(), rtol=1e-9
            )


def test_run_prints_table_and_writes_json_and_html(tmp_path: Path) -> None:
    args = [
        "run",
        "--model",
        "meta-llama/Meta-Llama-3-8B",
        "--instance",
        "trn1.32xlarge",
        "--replicas",
        "2",
        "--tp",
        "8",
        "--workload",
        "poisson:n=300,rate=4,prompt=800,output=120,seed=2",
        "--slo-ttft-ms",
        "2000",
        "--slo-tpot-ms",
        "60",
        "--json",
        str(tmp_path / "r.json"),
        "--report",
        str(tmp_path / "r.html"),
    ]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    for needle in ("TTFT", "TPOT", "E2E", "goodput", "utilisation", "chip-hours", "per M output tokens"):
        assert needle in result.output
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["requests"] == 300
    assert summary["ttft_ms"]["p50"] <= summary["ttft_ms"]["p99"]
    assert 0 < summary["utilisation"] <= 1
    page = (tmp_path / "r.html").read_text()
    assert page.count("<svg") == 4
    assert "<polyline" in page


def test_python_dash_m_runs_the_group() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "switchyard.accelerator", "--help"], capture_output=True, text=True, check=True
    )
    assert "point" in out.stdout
    assert "calibrate" in out.stdout


def test_compare_prints_one_row_per_fleet_with_price_performance() -> None:
    args = [
        "compare",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--workload",
        "poisson:n=200,rate=3,seed=1",
        "--fleet",
        "trn2.48xlarge:tp=8:replicas=1",
        "--fleet",
        "p5.48xlarge:tp=1:replicas=2",
        "--fleet",
        "trn3-gen1-ultraserver:tp=8",
    ]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 4
    assert lines[1].split()[-1] == "1.00x"  # the first fleet is the reference
    assert lines[3].split()[-1] == "n/a"  # Trainium3 has no published price
    bad = CliRunner().invoke(
        simulate,
        [
            "compare",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--workload",
            "poisson:n=5,rate=1",
            "--fleet",
            "p5.48xlarge:tp=3",
        ],
    )
    assert bad.exit_code == 1
    assert "valid TP degrees" in bad.output


def test_run_disaggregated_prefill_and_decode_pools() -> None:
    args = [
        "run",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--instance",
        "trn2.48xlarge",
        "--tp",
        "16",
        "--decode-instance",
        "cs-3",
        "--workload",
        "poisson:n=100,rate=2,seed=1",
    ]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    assert "trn2.48xlarge + cs-3" in result.output
    assert "n/a (no published price)" in result.output


def test_point_takes_the_compiled_batch_and_host_sampling_of_a_served_model() -> None:
    base = ["point", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--instance", "inf2.48xlarge", "--tp", "8"]
    base += ["--input-len", "1500", "--output-len", "250", "--json"]
    runs = {}
    for name, extra in (("plain", []), ("compiled", ["--compiled-batch", "32"])):
        for sampling in ((), ("--host-sampling",)):
            result = CliRunner().invoke(simulate, [*base, *extra, *sampling])
            assert result.exit_code == 0, result.output
            runs[name, bool(sampling)] = json.loads(result.output)["tpot_ms"]
    assert runs["compiled", False] > runs["plain", False]  # 31 padded rows
    assert runs["compiled", True] - runs["compiled", False] > runs["plain", True] - runs["plain", False]
    # the published CPU-sampling row (optimum-neuron vLLM, graphs compiled for 32): 48.22 ms per token
    assert runs["compiled", True] == pytest.approx(48.22, rel=0.05)
