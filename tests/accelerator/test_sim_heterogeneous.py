from __future__ import annotations

from collections import Counter

import pytest
from click.testing import CliRunner

from switchyard.accelerator.cli import simulate
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.metrics import summarize
from switchyard.accelerator.sim.workloads import poisson_workload

MODEL = "meta-llama/Llama-3.1-8B"


def _mixed(policy: str) -> Cluster:
    fast = make_deployment(MODEL, "trn2.48xlarge", 16)
    slow = make_deployment(MODEL, "inf2.24xlarge", 8)
    return Cluster.heterogeneous([(fast, 1), (slow, 1)], policy)


def test_least_load_sends_more_work_to_the_faster_replica() -> None:
    cluster = _mixed("least_load")
    assert cluster.replicas[0].seconds_per_token < cluster.replicas[1].seconds_per_token
    finished = cluster.run(poisson_workload(400, rate_per_s=6.0, seed=2))
    share = Counter(f.replica for f in finished)
    assert share[0] > share[1] > 0
    for r in cluster.replicas:
        assert sum(f.chip_us for f in finished if f.replica == r.index) == r.chip_us_total


def test_summary_prices_each_replica_by_its_own_instance() -> None:
    cluster = _mixed("round_robin")
    finished = cluster.run(poisson_workload(100, rate_per_s=2.0, seed=3))
    s = summarize(finished, cluster)
    assert s.instance == "trn2.48xlarge + inf2.24xlarge"
    assert s.chips == 4 + 4
    assert s.coefficients_group == "trn2 + inf2"  # each generation's newest stack (NxD Inference)
    assert s.cost_usd is not None
    hours = s.duration_s / 3600
    expected = (4 * 46.98 / 16 + 4 * 6.4906 / 6) * hours
    assert float(s.cost_usd) == pytest.approx(expected, rel=1e-3)


def test_pools_must_serve_one_model() -> None:
    with pytest.raises(ValueError, match="same model"):
        Cluster.heterogeneous(
            [
                (make_deployment(MODEL, "trn2.48xlarge", 16), 1),
                (make_deployment("Qwen/Qwen3-32B", "trn2.48xlarge", 16), 1),
            ]
        )


def test_cli_run_with_an_extra_pool() -> None:
    args = [
        "run",
        "--model",
        MODEL,
        "--instance",
        "trn2.48xlarge",
        "--tp",
        "16",
        "--extra-pool",
        "p5.48xlarge:tp=1:replicas=2",
        "--workload",
        "poisson:n=80,rate=2,seed=1",
    ]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    assert "3 x trn2.48xlarge + p5.48xlarge" in result.output
