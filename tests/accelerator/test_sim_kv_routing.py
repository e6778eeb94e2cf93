from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.sim.block_hashes import ideal_hit_rate
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.metrics import summarize
from switchyard.accelerator.sim.mooncake import load_mooncake_trace
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.workloads import agentic_workload, load_workload_file, poisson_workload

DEP_8B = make_deployment("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8)
TRACE = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "traces" / "mooncake_conversation_trace.jsonl"
PREFIX = tuple(range(250))  # 8,000 tokens of 32-token blocks


def _warm_replica_zero() -> Cluster:
    """Two kv_aware replicas; the 8k-token prefix was served (and is cached) on replica 0."""
    cluster = Cluster(DEP_8B, 2, "kv_aware")
    assert cluster.submit(Request(0, 0.0, 8000, 5, block_hashes=PREFIX)) == 0
    cluster.step_until(20.0)
    cluster.collect()
    return cluster


def test_kv_aware_sends_a_request_to_the_replica_holding_its_prefix_though_it_is_busier() -> None:
    cluster = _warm_replica_zero()
    cluster.replicas[0].submit(Request(90, 20.0, 1000, 200))  # some unrelated work there
    request = Request(1, 20.0, 8100, 5, block_hashes=(*PREFIX, 999, 1000))
    assert cluster.replicas[0].load_s > cluster.replicas[1].load_s  # least_load would pick replica 1
    assert cluster.submit(request) == 0
    cluster.step_until(float("inf"))
    assert next(f for f in cluster.collect() if f.request_id == 1).cached_tokens == 8000


def test_kv_aware_leaves_the_cached_replica_when_its_queue_outweighs_the_saving() -> None:
    cluster = _warm_replica_zero()
    cluster.replicas[0].submit(Request(90, 20.0, 30000, 200))  # a prefill far longer than the prompt itself
    assert cluster.submit(Request(1, 20.0, 8100, 5, block_hashes=(*PREFIX, 999, 1000))) == 1


def test_a_session_stays_together_when_nothing_is_cached_yet() -> None:
    cluster = Cluster(DEP_8B, 2, "kv_aware")
    assert cluster.submit(Request(0, 0.0, 500, 5, session="s")) == 0
    cluster.step_until(5.0)
    cluster.replicas[0].submit(Request(90, 5.0, 300, 50))  # replica 0 is now the busier one
    assert cluster.submit(Request(1, 5.0, 700, 5, session="s")) == 0
    assert cluster.submit(Request(2, 5.0, 700, 5, session="other")) == 1


def test_kv_aware_is_deterministic_and_reaches_most_of_the_ideal_hit_rate() -> None:
    reqs = agentic_workload(80, 2.0, agents=4, system_prompt_tokens=2048, seed=3)
    runs = [Cluster(DEP_8B, 3, "kv_aware").run(reqs) for _ in range(2)]
    assert runs[0] == runs[1]
    cluster = Cluster(DEP_8B, 3, "kv_aware")
    summary = summarize(cluster.run(reqs), cluster, 500, 50, reqs)
    assert summary.prefix_hit_rate is not None
    assert summary.prefix_hit_rate["blocks"] >= 0.85 * summary.prefix_hit_rate["ideal_blocks"]


def test_kv_aware_is_no_worse_than_least_load_without_shared_prefixes() -> None:
    reqs = poisson_workload(600, 12.0, seed=4)
    goodput = {}
    for policy in ("least_load", "kv_aware"):
        cluster = Cluster(DEP_8B, 4, policy)
        goodput[policy] = summarize(cluster.run(reqs), cluster, 500, 50).goodput_requests_per_s
    assert goodput["kv_aware"] >= 0.95 * goodput["least_load"]


def test_the_ideal_hit_rate_counts_each_requests_leading_blocks_seen_before(tmp_path: Path) -> None:
    lines = [
        {"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [0, 1, 2]},
        {"timestamp": 10, "input_length": 1400, "output_length": 0, "hash_ids": [0, 1, 3]},
        {"timestamp": 20, "input_length": 1000, "output_length": 10, "hash_ids": [4, 1]},  # 1 is not leading
        {"timestamp": 30, "input_length": 1800, "output_length": 10, "hash_ids": [0, 1, 2, 5]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n", encoding="utf-8")
    reqs = load_workload_file(path)
    assert [(r.arrival_s, r.output_tokens, r.hash_block_tokens) for r in reqs][:2] == [(0.0, 10, 512), (0.01, 1, 512)]
    ideal = ideal_hit_rate(reqs)
    assert ideal.blocks == pytest.approx(5 / 12)
    assert ideal.tokens == pytest.approx((2 * 512 + 3 * 512) / (1500 + 1400 + 1000 + 1800))


def test_the_mooncake_conversation_trace_has_the_published_ceiling() -> None:
    reqs = load_mooncake_trace(TRACE)
    assert len(reqs) == 12031
    assert ideal_hit_rate(reqs).blocks == pytest.approx(0.366, abs=0.0005)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"timestamp": 0, "input_length": 10, "output_length": 5', "line 2: "),
        ('{"timestamp": 0, "input_length": 10, "output_length": 5}', "line 2: hash_ids"),
        ('{"timestamp": 0, "input_length": 0, "output_length": 5, "hash_ids": []}', "line 2: .*input_length"),
        ('{"timestamp": "soon", "input_length": 10, "output_length": 5, "hash_ids": [1]}', "line 2: timestamp"),
        ("[1, 2]", "line 2: a line must hold one JSON object"),
    ],
)
def test_a_malformed_mooncake_line_is_an_error_naming_it(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}\n' + line + "\n")
    with pytest.raises(ValueError, match=message):
        load_mooncake_trace(path)
    result = CliRunner().invoke(
        simulate,
        [
            "run",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--instance",
            "trn2.48xlarge",
            "--tp",
            "8",
            "--workload",
            str(path),
        ],
    )
    assert result.exit_code != 0
    assert "line 2" in result.output


def test_simulate_run_reports_the_prefix_hit_rate_beside_its_ceiling(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = CliRunner().invoke(
        simulate,
        [
            "run", "--model", "meta-llama/Llama-3.1-8B", "--instance", "trn2.48xlarge", "--tp", "8",
            "--replicas", "2", "--policy", "kv_aware", "--workload", "agentic:sessions=20,rate=1,system=2048",
            "--slo-ttft-ms", "500", "--json", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "prefix cache" in result.output
    assert "one infinite cache" in result.output
    hit = json.loads(out.read_text())["prefix_hit_rate"]
    assert set(hit) == {"blocks", "tokens", "ideal_blocks", "ideal_tokens"}
    assert 0 < hit["blocks"] <= hit["ideal_blocks"] <= 1
