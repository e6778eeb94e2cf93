from __future__ import annotations

import pytest

from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.disaggregated import DisaggregatedCluster
from switchyard.accelerator.sim.metrics import summarize
from switchyard.accelerator.sim.workloads import poisson_workload

MODEL = "meta-llama/Llama-3.1-8B"


def _fleet(link_bytes_per_s: float | None = None) -> DisaggregatedCluster:
    prefill = Cluster(make_deployment(MODEL, "trn2.48xlarge", 16), 1)
    decode = Cluster(make_deployment(MODEL, "cs-3", 1), 1)
    return DisaggregatedCluster(prefill, decode, link_bytes_per_s)


def test_every_request_is_prefilled_transferred_and_decoded_once() -> None:
    reqs = poisson_workload(300, rate_per_s=5.0, prompt_mean=1500, output_mean=120, seed=3)
    fleet = _fleet()
    finished = fleet.run(reqs)
    assert sorted(f.request_id for f in finished) == [r.request_id for r in reqs]
    by_id = {r.request_id: r for r in reqs}
    for f in finished:
        r = by_id[f.request_id]
        assert f.output_tokens == r.output_tokens
        if r.output_tokens > 1:  # decoding starts only after the KV cache crossed the link
            assert f.finish_s >= f.first_token_s + fleet.transfer_s(r.prompt_tokens)
    replicas = fleet.prefill.replicas + fleet.decode.replicas
    assert sum(f.chip_us for f in finished) == sum(r.chip_us_total for r in replicas)
    assert fleet.idle


def test_a_slower_link_delays_decoding_but_not_the_first_token() -> None:
    reqs = poisson_workload(100, rate_per_s=2.0, prompt_mean=4000, output_mean=50, seed=4)
    fast = {f.request_id: f for f in _fleet(100e9).run(reqs)}
    slow = {f.request_id: f for f in _fleet(1e9).run(reqs)}
    assert all(slow[i].first_token_s == pytest.approx(fast[i].first_token_s) for i in fast)
    assert sum(f.e2e_ms for f in slow.values()) > sum(f.e2e_ms for f in fast.values())


def test_summary_counts_both_pools() -> None:
    reqs = poisson_workload(100, rate_per_s=2.0, seed=5)
    fleet = _fleet()
    s = summarize(fleet.run(reqs), fleet)
    assert s.instance == "trn2.48xlarge + cs-3"
    assert s.chips == 4 + 1
    assert s.cost_usd is None  # CS-3 has no published price


def test_pools_must_serve_the_same_model() -> None:
    with pytest.raises(ValueError, match="same model"):
        DisaggregatedCluster(
            Cluster(make_deployment(MODEL, "trn2.48xlarge", 16), 1),
            Cluster(make_deployment("meta-llama/Meta-Llama-3-8B", "cs-3", 1), 1),
        )
