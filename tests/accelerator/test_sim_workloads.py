from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from switchyard.accelerator.sim.workloads import (
    agentic_workload,
    bursty_workload,
    load_azure_trace,
    parse_workload,
    poisson_workload,
    repeat_workload,
    scale_rate,
)


def test_azure_trace_loads_every_request_in_arrival_order(conv_trace: Path) -> None:
    reqs = load_azure_trace(conv_trace)
    assert len(reqs) == 19366
    assert reqs[0].arrival_s == 0.0
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(reqs))
    assert 3000 < reqs[-1].arrival_s < 4000  # about an hour
    assert min(r.output_tokens for r in reqs) >= 1
    assert len({r.request_id for r in reqs}) == len(reqs)


def test_synthetic_workloads_have_the_requested_mean_rate_and_are_seeded() -> None:
    p = poisson_workload(4000, rate_per_s=20.0, seed=3)
    assert len(p) / p[-1].arrival_s == pytest.approx(20.0, rel=0.1)
    assert p == poisson_workload(4000, rate_per_s=20.0, seed=3)
    assert p != poisson_workload(4000, rate_per_s=20.0, seed=4)
    b = bursty_workload(8000, rate_per_s=20.0, seed=3)
    assert len(b) / b[-1].arrival_s == pytest.approx(20.0, rel=0.25)
    gaps = [y.arrival_s - x.arrival_s for x, y in itertools.pairwise(b)]
    mean = sum(gaps) / len(gaps)
    cv2 = sum((g - mean) ** 2 for g in gaps) / len(gaps) / mean**2
    assert cv2 > 1.3  # burstier than Poisson (squared coefficient of variation 1)


def test_rate_scaling_and_repetition() -> None:
    base = poisson_workload(100, rate_per_s=5.0, seed=1)
    fast = scale_rate(base, 4.0)
    assert fast[-1].arrival_s == pytest.approx(base[-1].arrival_s / 4)
    rep = repeat_workload(base, 3)
    assert len(rep) == 300
    assert len({r.request_id for r in rep}) == 300
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(rep))
    with pytest.raises(ValueError, match="positive"):
        scale_rate(base, 0)


def test_parse_workload_specs() -> None:
    assert len(parse_workload("poisson:n=50,rate=2,seed=1")) == 50
    assert len(parse_workload("bursty:n=60,rate=2,burst=4")) == 60
    with pytest.raises(ValueError, match="needs n= and rate="):
        parse_workload("poisson:n=5")


def test_scaling_and_repeating_keep_every_request_field() -> None:
    base = agentic_workload(10, session_rate_per_s=1.0, seed=1)
    for out in (scale_rate(base, 2.0), repeat_workload(base, 2)[: len(base)]):
        for a, b in zip(base, out, strict=True):
            assert (a.block_hashes, a.hash_block_tokens, a.session, a.tenant, a.priority) == (
                b.block_hashes,
                b.hash_block_tokens,
                b.session,
                b.tenant,
                b.priority,
            )
