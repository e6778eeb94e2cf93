"""One simulated fleet shared over HTTP: ``FleetServer`` on 127.0.0.1, ``RemoteSimulatedDeployment`` clients.

Two client pools stand for two API processes: they share the fleet's replicas (not a copy each), every receipt
arrives exactly as the fleet computed it, and compute whose receipt could not be delivered is counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from switchyard.accelerator.pool import (
    AcceleratorPool,
    ComputeReceipt,
    DeploymentSpec,
    FleetServer,
    InferenceRequest,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
)
from tests.support.served import served

SMALL = DeploymentSpec(name="small", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4, replicas=2)
TOKEN = "fleet-secret"


class Served:
    def __init__(self, server: FleetServer, url: str) -> None:
        self.server = server
        self.url = url

    def busy(self) -> int:
        return sum(chip_us for _instance, chip_us in self.server.pool.busy_chip_us().values())

    def client(self, token: str = TOKEN) -> AcceleratorPool:
        return AcceleratorPool.from_specs([SMALL], fleet_url=self.url, fleet_token=token)


def _fleet(time_scale: float) -> Iterator[Served]:
    app = FleetServer(AcceleratorPool.from_specs([SMALL], time_scale=time_scale), token=TOKEN)
    with served(app) as url:
        yield Served(app, url)


@pytest.fixture
def fleet() -> Iterator[Served]:
    yield from _fleet(0)


@pytest.fixture
def slow_fleet() -> Iterator[Served]:
    yield from _fleet(1.0)


def _request(n: int, tenant: str = "t", **kw: Any) -> InferenceRequest:
    messages = [{"role": "user", "content": f"question number {n} " * 20}]
    return InferenceRequest(request_id=f"r{n}", tenant=tenant, model="small", messages=messages, **kw)


async def _run(pool: AcceleratorPool, request: InferenceRequest) -> tuple[list[Any], ComputeReceipt]:
    events = [event async for event in pool.submit(request)]
    assert isinstance(events[-1], ComputeReceipt)
    return events[:-1], events[-1]


async def test_two_gateways_share_one_fleet_and_receipts_sum_to_its_busy_time(fleet: Served) -> None:
    gateways = [fleet.client(), fleet.client()]
    local = AcceleratorPool.from_specs([SMALL], time_scale=0)
    results = await asyncio.gather(
        *(_run(gateways[n % 2], _request(n, tenant=f"t{n % 3}", max_tokens=20, seed=n)) for n in range(30))
    )
    receipts = [receipt for _deltas, receipt in results]
    assert sum(r.chip_us for r in receipts) == fleet.busy()  # one fleet computed all of it, exactly attributed
    assert {r.replica for r in receipts} == {"small/0", "small/1"}
    assert all(g.busy_chip_us() == {} for g in gateways)  # the gateways record no busy time of their own
    # what a gateway streams is what the simulator answers in-process: the same text and token counts
    deltas, receipt = results[7]
    local_deltas, local_receipt = await _run(local, _request(7, tenant="t1", max_tokens=20, seed=7))
    assert "".join(d.text for d in deltas) == "".join(d.text for d in local_deltas if isinstance(d, TextDelta))
    assert (receipt.prompt_tokens, receipt.completion_tokens) == (
        local_receipt.prompt_tokens,
        local_receipt.completion_tokens,
    )
    status = (await gateways[0].status())[0]
    assert status["backend"] == "trainium-sim"
    assert [r["chip_us"] for r in status["replicas"]] == [c for _i, c in fleet.server.pool.busy_chip_us().values()]
    for gateway in gateways:
        await gateway.aclose()


async def test_tool_calls_and_non_streamed_requests_cross_the_wire(fleet: Served) -> None:
    pool = fleet.client()
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    request = InferenceRequest(
        request_id="tools",
        tenant="t",
        model="small",
        messages=[{"role": "user", "content": "please lookup"}],
        tools=[tool],
        stream=False,
    )
    deltas, receipt = await _run(pool, request)
    calls = [d.call for d in deltas if isinstance(d, ToolCallDelta)]
    assert [c.name for c in calls] == ["lookup"]
    assert receipt.finish_reason == "tool_calls"
    assert receipt.tool_calls == tuple(calls)
    await pool.aclose()


async def test_cancel_over_http_still_delivers_the_receipt_of_the_compute_used(slow_fleet: Served) -> None:
    pool = slow_fleet.client()
    stream = pool.submit(_request(1, max_tokens=2000))
    seen = 0
    async for event in stream:
        if isinstance(event, TextDelta):
            seen += 1
            if seen == 3:
                pool.backend("small").cancel("r1")
        if isinstance(event, ComputeReceipt):
            receipt = event
    assert receipt.finish_reason == "cancelled"
    assert 3 <= receipt.completion_tokens < 2000
    assert receipt.chip_us == slow_fleet.busy() > 0
    kept = [(r.request_id, r.chip_us, r.finish_reason) for r, _at in slow_fleet.server.take_receipts()]
    assert kept == [("r1", receipt.chip_us, "cancelled")]  # the fleet's own copy, to record
    await pool.aclose()


async def test_a_gateway_that_dies_mid_stream_leaves_a_receipt_for_the_books(slow_fleet: Served) -> None:
    body = {
        "model": "small",
        "messages": [{"role": "user", "content": "hello " * 30}],
        "max_tokens": 2000,
        "stream": True,
        "switchyard": {"request_id": "gone", "tenant": "t"},
    }
    headers = {"authorization": f"Bearer {TOKEN}"}
    url = f"{slow_fleet.url}/v1/chat/completions"
    async with httpx.AsyncClient() as client, client.stream("POST", url, json=body, headers=headers) as r:
        lines = 0
        async for line in r.aiter_lines():
            lines += line.startswith("data:")
            if lines == 4:
                break  # the connection closes here, as when the gateway's process is killed
    deadline = time.monotonic() + 10
    taken: list[Any] = []
    while not taken and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        taken = slow_fleet.server.take_receipts()
    ((receipt, _at),) = taken
    assert (receipt.request_id, receipt.tenant, receipt.finish_reason) == ("gone", "t", "cancelled")
    assert receipt.replica.startswith("small/")
    assert receipt.chip_us == slow_fleet.busy() > 0  # the request's whole compute, and nothing ran on after it
    assert slow_fleet.server.in_flight() == 0


async def test_a_request_repeated_under_its_id_runs_beside_the_first(slow_fleet: Served) -> None:
    """An agent step retried by another worker while the first worker is frozen mid-call: both run, each ends with
    its own receipt under the caller's id, and stopping one leaves the other alone."""
    pools = [slow_fleet.client(), slow_fleet.client()]
    first = pools[0].submit(_request(5, max_tokens=40))
    assert isinstance(await first.__anext__(), TextDelta)
    _deltas, second = await _run(pools[1], _request(5, max_tokens=40))
    assert second.finish_reason == "length"
    assert second.completion_tokens == 40
    rest = [event async for event in first]
    assert isinstance(rest[-1], ComputeReceipt)
    assert rest[-1].request_id == second.request_id == "r5"
    assert sorted(r.request_id for r, _at in slow_fleet.server.take_receipts()) == ["r5", "r5"]
    for pool in pools:
        await pool.aclose()


async def test_the_fleet_refuses_callers_without_its_token_and_unknown_models(fleet: Served) -> None:
    intruder = fleet.client(token="wrong")
    with pytest.raises(UpstreamError, match="401"):
        await _run(intruder, _request(1, max_tokens=5))
    async with httpx.AsyncClient() as client:
        health = await client.get(f"{fleet.url}/healthz")
        unknown = await client.post(
            f"{fleet.url}/v1/chat/completions",
            json={"model": "nope", "messages": [], "switchyard": {"request_id": "x", "tenant": "t"}},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
    assert health.json()["status"] == "ok"
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    assert fleet.busy() == 0
    await intruder.aclose()
