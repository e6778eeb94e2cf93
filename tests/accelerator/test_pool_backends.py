"""The live pool: the simulated backend on the wall clock (time_scale 0) and a real OpenAI-compatible upstream."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from switchyard.accelerator.errors import ConfigurationError, UnknownNameError
from switchyard.accelerator.pool import (
    AcceleratorPool,
    ComputeReceipt,
    DeploymentSpec,
    InferenceRequest,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
    count_tokens,
    parse_fleet,
)
from switchyard.accelerator.pool.fleet import DEFAULT_FLEET
from switchyard.accelerator.pool.prompt_blocks import prompt_block_hashes
from switchyard.accelerator.pool.sim_backend import TICK_S, SimulatedDeployment
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.point import simulate_point
from switchyard.accelerator.sim.requests import FinishedRequest, Request

SMALL = DeploymentSpec(name="small", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4, replicas=2)


def _request(n: int, tenant: str = "t", **kw: Any) -> InferenceRequest:
    messages = [{"role": "user", "content": f"question number {n} " * 20}]
    return InferenceRequest(request_id=f"r{n}", tenant=tenant, model=kw.pop("model", "small"), messages=messages, **kw)


async def _run(pool: AcceleratorPool, request: InferenceRequest) -> tuple[list[Any], ComputeReceipt]:
    events = [event async for event in pool.submit(request)]
    assert isinstance(events[-1], ComputeReceipt)
    assert not any(isinstance(e, ComputeReceipt) for e in events[:-1])
    return events[:-1], events[-1]


async def test_simulated_requests_stream_text_and_one_receipt() -> None:
    pool = AcceleratorPool.from_specs([SMALL], time_scale=0)
    deltas, receipt = await _run(pool, _request(1, max_tokens=12, ignore_eos=True, seed=1))
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert count_tokens(text) == receipt.completion_tokens == 12
    assert receipt.finish_reason == "length"
    assert receipt.chip_us > 0
    assert receipt.ttft_ms > 0
    assert receipt.decode_ms > 0
    assert receipt.instance_type == "trn2.3xlarge"


async def test_concurrent_requests_share_batches_and_receipts_sum_to_busy_chip_time() -> None:
    pool = AcceleratorPool.from_specs([SMALL], time_scale=0)
    results = await asyncio.gather(*(_run(pool, _request(n, tenant=f"t{n % 3}", max_tokens=30)) for n in range(40)))
    receipts = [r for _, r in results]
    assert len({r.request_id for r in receipts}) == 40
    backend: Any = pool.backend("small")
    busy_chip_us = sum(replica.chip_us_total for replica in backend.cluster.replicas)
    assert sum(r.chip_us for r in receipts) == busy_chip_us
    assert {r.replica for r in receipts} == {"small/0", "small/1"}
    status = (await pool.status())[0]
    assert status["queued"] == status["running"] == 0


async def test_same_request_same_answer_and_tool_calls() -> None:
    pool = AcceleratorPool.from_specs([SMALL], time_scale=0)
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    request = InferenceRequest(
        request_id="x", tenant="t", model="small", messages=[{"role": "user", "content": "call lookup"}], tools=[tool]
    )
    deltas, receipt = await _run(pool, request)
    assert [type(d) for d in deltas] == [ToolCallDelta]
    assert receipt.finish_reason == "tool_calls"
    assert receipt.tool_calls[0].name == "lookup"


async def test_unknown_model_names_close_matches() -> None:
    pool = AcceleratorPool.from_specs([SMALL], time_scale=0)
    with pytest.raises(UnknownNameError, match="small"):
        pool.submit(_request(1, model="smal"))


def test_fleet_file_errors_name_the_problem() -> None:
    with pytest.raises(ConfigurationError, match="unknown fields"):
        parse_fleet({"deployments": [{"name": "a", "model": "m", "gpus": 3}]})
    with pytest.raises(ConfigurationError, match="base_url"):
        parse_fleet({"deployments": [{"name": "a", "backend": "openai-compatible"}]})
    with pytest.raises(ConfigurationError, match="unique"):
        parse_fleet({"deployments": [{"name": "a", "model": "m"}, {"name": "a", "model": "m"}]})


@pytest.mark.parametrize("stream", [True, False])
async def test_upstream_backend_meters_wall_time_times_chips(fake_upstream: Any, stream: bool) -> None:
    spec = DeploymentSpec(
        name="up", backend="openai-compatible", base_url=fake_upstream.base_url, upstream_model="real", chips=4
    )
    pool = AcceleratorPool.from_specs([spec])
    try:
        deltas, receipt = await _run(pool, _request(1, model="up", max_tokens=5, stream=stream))
        assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "w0 w1 w2 w3 w4"
        assert receipt.completion_tokens == 5
        assert receipt.prompt_tokens == 7  # the upstream's own usage wins over our estimate
        assert receipt.chip_us > 0
        assert receipt.chip_us % 4 == 0
        assert receipt.ttft_ms > 0
        assert fake_upstream.requests[-1]["model"] == "real"
        # A caller that wants the whole answer gets it from the upstream in one piece.
        assert fake_upstream.requests[-1].get("stream", False) is stream

        tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
        deltas, receipt = await _run(pool, _request(2, model="up", tools=[tool], stream=stream))
        calls = [d.call for d in deltas if isinstance(d, ToolCallDelta)]
        assert [(c.id, c.name, c.arguments) for c in calls] == [("call_echo_1", "lookup", "{}")]
        assert receipt.finish_reason == "tool_calls"
    finally:
        await pool.aclose()


async def test_upstream_errors_and_unreachable_upstreams_raise(fake_upstream: Any) -> None:
    failing = DeploymentSpec(name="bad", backend="openai-compatible", base_url=fake_upstream.base_url + "/fail")
    gone = DeploymentSpec(name="gone", backend="openai-compatible", base_url="http://127.0.0.1:9/v1")
    stalled = DeploymentSpec(
        name="stalled", backend="openai-compatible", base_url=fake_upstream.base_url + "/stall", timeout_s=0.3
    )
    pool = AcceleratorPool.from_specs([failing, gone, stalled])
    try:
        with pytest.raises(UpstreamError, match="500"):
            await _run(pool, _request(1, model="bad"))
        with pytest.raises(UpstreamError, match="unreachable"):
            await _run(pool, _request(1, model="gone"))
        with pytest.raises(UpstreamError, match="failed while answering"):
            await _run(pool, _request(1, model="stalled", stream=False))
    finally:
        await pool.aclose()


async def test_on_the_wall_clock_text_streams_while_it_is_generated() -> None:
    pool = AcceleratorPool.from_specs([SMALL], time_scale=1.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    arrivals: list[float] = []
    receipt = None
    async for event in pool.submit(_request(1, max_tokens=40, ignore_eos=True)):
        if isinstance(event, TextDelta):
            arrivals.append(loop.time() - started)
        elif isinstance(event, ComputeReceipt):
            receipt = event
    assert receipt is not None
    assert len(arrivals) == 40
    # Tokens arrive over the simulated decode time, not all at once at the end.
    assert arrivals[-1] - arrivals[0] > 0.5 * receipt.decode_ms / 1e3
    assert arrivals[0] < arrivals[-1] / 2


async def test_cancelled_request_stops_and_reports_the_compute_it_used() -> None:
    pool = AcceleratorPool.from_specs([SMALL], time_scale=1.0)
    backend: Any = pool.backend("small")
    received: list[Any] = []
    async for event in pool.submit(_request(7, max_tokens=400, ignore_eos=True)):
        received.append(event)
        if sum(isinstance(e, TextDelta) for e in received) == 5:
            backend.cancel("r7")
    receipt = received[-1]
    assert isinstance(receipt, ComputeReceipt)
    assert receipt.finish_reason == "cancelled"
    assert 5 <= receipt.completion_tokens < 400
    assert receipt.chip_us > 0
    assert receipt.decode_ms < 400 * 7  # stopped long before 400 tokens' worth of decoding
    assert sum(r.chip_us_total for r in backend.cluster.replicas) == receipt.chip_us
    assert backend.cluster.idle


async def test_cancelling_a_queued_request_costs_nothing() -> None:
    spec = DeploymentSpec(name="one", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4, max_batch=1)
    pool = AcceleratorPool.from_specs([spec], time_scale=1.0)
    backend: Any = pool.backend("one")
    first = asyncio.create_task(_run(pool, _request(1, model="one", max_tokens=30, ignore_eos=True)))
    second = asyncio.create_task(_run(pool, _request(2, model="one", max_tokens=30, ignore_eos=True)))
    await asyncio.sleep(0.05)
    assert len(backend.dispatcher.queue) == 1  # one batch slot: the second waits
    backend.cancel("r2")
    _, receipt = await second
    assert receipt.finish_reason == "cancelled"
    assert receipt.chip_us == 0
    assert receipt.completion_tokens == 0
    _, done = await first
    assert done.finish_reason == "length"


DEFAULT_8B = DEFAULT_FLEET[0]  # two replicas of Llama 3.1 8B at TP8 on trn2.48xlarge, as the platform serves it


def _decode_ms_per_token(receipt: ComputeReceipt) -> float:
    return receipt.decode_ms / (receipt.completion_tokens - 1)


async def test_either_replica_decodes_a_request_at_point_modes_pace() -> None:
    """Two requests at once go one to each replica, alone there: both decode at point mode's time per token."""
    backend = SimulatedDeployment(DEFAULT_8B, time_scale=0)
    receipts = await asyncio.gather(
        *(_sim_run(backend, _request(n, model=DEFAULT_8B.name, max_tokens=400, ignore_eos=True)) for n in range(2))
    )
    assert sorted(r.replica for r in receipts) == [f"{DEFAULT_8B.name}/0", f"{DEFAULT_8B.name}/1"]
    point = simulate_point(DEFAULT_8B.model, DEFAULT_8B.instance, DEFAULT_8B.tp, 1, receipts[0].prompt_tokens, 400)
    for receipt in receipts:
        assert receipt.completion_tokens == 400
        assert _decode_ms_per_token(receipt) == pytest.approx(point.tpot_ms, rel=0.01)
    assert receipts[0].decode_ms == pytest.approx(receipts[1].decode_ms, rel=1e-9)


async def _sim_run(backend: SimulatedDeployment, request: InferenceRequest) -> ComputeReceipt:
    events = [event async for event in backend.generate(request)]
    assert isinstance(events[-1], ComputeReceipt)
    return events[-1]


def _single_steps(
    backend: SimulatedDeployment, receipts: list[ComputeReceipt], sent: list[InferenceRequest]
) -> list[FinishedRequest]:
    """The same requests (with their prompts' block hashes), arriving together, on a cluster of the deployment that
    runs one iteration at a time."""
    spec = backend.spec
    cluster = Cluster(
        backend.deployment, spec.replicas, spec.policy, config=EngineConfig(max_batch=spec.max_batch, max_jump_steps=1)
    )
    requests = [
        Request(
            n + 1,
            0.0,
            r.prompt_tokens,
            r.completion_tokens,
            tenant=r.tenant,
            block_hashes=prompt_block_hashes(q.tenant, q.messages, q.tools),
        )
        for n, (r, q) in enumerate(zip(receipts, sent, strict=True))
    ]
    return sorted(cluster.run(requests), key=lambda f: f.request_id)


def _same_as_single_steps(receipts: list[ComputeReceipt], single: list[FinishedRequest]) -> None:
    for receipt, step in zip(receipts, single, strict=True):
        assert receipt.replica.endswith(f"/{step.replica}")
        assert receipt.ttft_ms == pytest.approx(step.first_token_s * 1e3, rel=1e-9)
        assert receipt.decode_ms == pytest.approx((step.finish_s - step.first_token_s) * 1e3, rel=1e-9)


async def test_a_batch_of_three_on_two_replicas_matches_single_steps() -> None:
    backend = SimulatedDeployment(DEFAULT_8B, time_scale=0)
    sent = [_request(n, model=DEFAULT_8B.name, max_tokens=400, ignore_eos=True) for n in range(3)]
    receipts = list(await asyncio.gather(*(_sim_run(backend, request) for request in sent)))
    assert sorted(r.replica[-1] for r in receipts) == ["0", "0", "1"]
    _same_as_single_steps(receipts, _single_steps(backend, receipts, sent))


async def test_on_the_wall_clock_no_replica_runs_ahead_of_the_clock() -> None:
    """A replica runs the iteration that starts before the time it is driven to whole, so its clock ends past the
    wall's. The pool drove every replica to the latest of their clocks, so replicas whose iterations end at different
    times (batches of 2 and 1 here) leapfrogged each other an iteration per tick: with the wall clock standing still,
    the simulation ran on to the end, and on a real clock one replica's requests finished seconds early. A clock
    held still here stops the simulation within an iteration of it; moved on, the receipts are single steps'."""
    wall = [0.0]
    backend = SimulatedDeployment(DEFAULT_8B, time_scale=1.0, clock=lambda: wall[0])
    sent = [_request(n, model=DEFAULT_8B.name, max_tokens=400, ignore_eos=True) for n in range(3)]
    runs = [asyncio.create_task(_sim_run(backend, request)) for request in sent]
    await asyncio.sleep(0)  # the three arrive at 0
    assert len(backend.dispatcher.running) == 3
    wall[0] = 0.5
    seen, still = -1.0, 0
    for _ in range(5000):  # until the simulation stops moving (it never did before the whole decode had run)
        await asyncio.sleep(TICK_S)
        now = backend.dispatcher.now
        still = still + 1 if now == seen else 0
        seen = now
        if still == 20:
            break
    assert still == 20
    assert 0.5 <= backend.dispatcher.now < 0.5 + 0.05  # an iteration is ~8 ms
    progress = backend.cluster.progress()
    assert len(progress) == 3
    alone = simulate_point(DEFAULT_8B.model, DEFAULT_8B.instance, DEFAULT_8B.tp, 1, 16, 400)
    assert all(0 < generated < 550 / alone.tpot_ms for generated in progress.values())  # the tokens of 0.55 s
    wall[0] = 1e6
    receipts = list(await asyncio.gather(*runs))
    assert sorted(r.replica[-1] for r in receipts) == ["0", "0", "1"]
    _same_as_single_steps(receipts, _single_steps(backend, receipts, sent))
