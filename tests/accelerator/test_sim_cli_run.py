"""`simulate run` / `compare`: plain CSV workloads, the chunked-prefill token budget, progress on stderr."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.workloads import load_csv_workload, parse_workload

from .conftest import DATA

MODEL, INSTANCE, TP = "meta-llama/Meta-Llama-3-8B", "trn1.32xlarge", "8"


def _write(path: Path, text: str) -> Path:
    path.write_text(text.strip() + "\n", encoding="utf-8")
    return path


def test_a_plain_csv_workload_with_sessions_and_prefixes(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "w.csv",
        """
arrival_s,input_tokens,output_tokens,session,prefix_id,prefix_tokens
0.5,1200,40,s1,agent-a,1000
0.0,300,20,,,
5.0,1500,30,s1,agent-a,1000
""",
    )
    reqs = parse_workload(str(path))
    assert [r.request_id for r in reqs] == [1, 0, 2]  # numbered in file order, served in arrival order
    assert reqs[0] == Request(1, 0.0, 300, 20)
    # the prefix's 31 full 32-token blocks get hash-chain ids, shared by every request naming it
    assert reqs[1] == Request(0, 0.5, 1200, 40, session="s1", block_hashes=tuple(range(31)), hash_block_tokens=32)
    assert reqs[2].block_hashes == reqs[1].block_hashes
    finished = {f.request_id: f for f in Cluster(make_deployment(MODEL, INSTANCE, 8), 1).run(reqs)}
    assert finished[2].cached_tokens >= 992  # a later turn reuses the shared prefix (block-aligned)


def test_vidur_request_traces_read_as_plain_csv() -> None:
    reqs = load_csv_workload(DATA / "traces" / "conv_10k_poisson4.csv")
    assert len(reqs) == 10_000
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(reqs))
    assert 10_000 / reqs[-1].arrival_s == pytest.approx(4.0, rel=0.1)  # Poisson at 4 requests/s
    assert max(r.prompt_tokens + r.output_tokens for r in reqs) <= 4096


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("arrival_s,input_tokens\n0,10\n", "output_tokens or num_decode_tokens"),
        ("arrival_s,input_tokens,output_tokens\n0,10,5\n1,ten,5\n", "line 3"),
        ("arrival_s,input_tokens,output_tokens\n0,0,5\n", "line 2: token counts"),
        ("arrival_s,input_tokens,output_tokens,prefix_id,prefix_tokens\n0,10,5,p,20\n", "prefix_tokens"),
    ],
)
def test_bad_csv_workloads_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        parse_workload(str(path))
    result = CliRunner().invoke(
        simulate, ["run", "--model", MODEL, "--instance", INSTANCE, "--tp", TP, "--workload", str(path)]
    )
    assert result.exit_code != 0
    assert message.split(":")[0] in result.output


def _run(tmp_path: Path, workload: Path, *extra: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / f"run{len(list(tmp_path.iterdir()))}.json"
    args = ["run", "--model", MODEL, "--instance", INSTANCE, "--tp", TP, "--workload", str(workload), *extra]
    result = CliRunner().invoke(simulate, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text()), result.stderr


def test_max_batched_tokens_sets_the_prefill_chunk(tmp_path: Path) -> None:
    workload = _write(tmp_path / "one.csv", "arrival_s,input_tokens,output_tokens\n0,4000,8")
    whole, _ = _run(tmp_path, workload, "--max-batched-tokens", "4096")
    chunked, _ = _run(tmp_path, workload, "--max-batched-tokens", "512")
    dep = make_deployment(MODEL, INSTANCE, 8)
    for summary, budget in ((whole, 4096), (chunked, 512)):
        (f,) = Cluster(dep, 1, config=EngineConfig(max_batched_tokens=budget)).run([Request(0, 0.0, 4000, 8)])
        assert summary["ttft_ms"]["p50"] == pytest.approx(f.ttft_ms, rel=1e-9)
    assert chunked["ttft_ms"]["p50"] > whole["ttft_ms"]["p50"]  # eight passes over the weights, not one
    args = ["run", "--model", MODEL, "--instance", INSTANCE, "--tp", TP, "--workload", str(workload)]
    result = CliRunner().invoke(simulate, [*args, "--max-batched-tokens", "0"])
    assert result.exit_code != 0


def test_compare_takes_the_token_budget_too(tmp_path: Path) -> None:
    workload = _write(tmp_path / "one.csv", "arrival_s,input_tokens,output_tokens\n0,4000,8")
    rows = []
    for budget in ("4096", "512"):
        args = ["compare", "--model", MODEL, "--workload", str(workload), "--fleet", f"{INSTANCE}:tp={TP}"]
        result = CliRunner().invoke(simulate, [*args, "--max-batched-tokens", budget])
        assert result.exit_code == 0, result.output
        rows.append(result.output.splitlines()[1].split())
    assert float(rows[1][3]) > float(rows[0][3])  # TTFT p50 column


def test_progress_goes_to_stderr_when_asked_and_never_into_the_results(tmp_path: Path) -> None:
    workload = "poisson:n=400,rate=20,prompt=300,output=30,seed=1"
    quiet, quiet_err = _run_spec(workload)
    shown, shown_err = _run_spec(workload, "--progress")
    assert quiet_err == ""  # not a terminal: nothing unless asked
    assert "simulating 100.0%" in shown_err
    assert "400/400 requests" in shown_err
    assert quiet == shown  # the table on stdout is the same


def _run_spec(workload: str, *extra: str) -> tuple[str, str]:
    args = ["run", "--model", MODEL, "--instance", INSTANCE, "--tp", TP, "--workload", workload, *extra]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr
