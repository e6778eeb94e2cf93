"""The sim model's heavy answers are worked out off the event loop that serves every other tenant (issue 22).

A profile hook holds the big request's generation open (``complete`` for tenant ``big`` waits on an event) until
another tenant's small request has been answered: the small one can only be answered meanwhile if the loop is
free. Before answers moved to worker threads the hook held the loop itself, and the small request timed out. No
time is measured: the waits are deadlock guards.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import httpx

from switchyard.accelerator.pool import (
    AcceleratorPool,
    ComputeReceipt,
    DeploymentSpec,
    FleetServer,
    InferenceRequest,
    SimulatedDeployment,
    ToolCallDelta,
)
from switchyard.accelerator.pool.sim_backend import light
from switchyard.accelerator.pool.sim_lm import complete
from tests.support.served import served

SMALL = DeploymentSpec(name="small", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4, replicas=2)
HUGE = {"type": "array", "minItems": 5000, "items": {"type": "string", "minLength": 100_000}}
TOOL = {
    "type": "function",
    "function": {"name": "fill", "parameters": {"type": "object", "properties": {"a": HUGE}, "required": ["a"]}},
}
GUARD_S = 10.0


class HeldGeneration:
    """While active, ``complete()`` for tenant ``big`` waits (in whatever thread runs it) until ``release()``."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.threads: list[str] = []
        self.released_in_time: list[bool] = []  # False: the guard ran out (the hook held the loop itself)
        self.active = True

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if not self.active:
            sys.setprofile(None)  # this thread's hook goes once the test is over
            return
        if event == "call" and frame.f_code is complete.__code__:
            request = frame.f_locals.get("request")
            if isinstance(request, InferenceRequest) and request.tenant == "big":
                self.threads.append(threading.current_thread().name)
                self.entered.set()
                self.released_in_time.append(self.released.wait(GUARD_S))

    def release(self) -> None:
        self.released.set()


@contextmanager
def held_generation() -> Iterator[HeldGeneration]:
    """The hook in this thread and in every thread started meanwhile (servers, answer threads)."""
    hook = HeldGeneration()
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        yield hook
    finally:
        hook.active = False
        hook.release()
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setprofile(None)


def _body(tenant: str, **kw: Any) -> dict[str, Any]:
    return {
        "model": "small",
        "messages": [{"role": "user", "content": "go"}],
        "switchyard": {"request_id": tenant, "tenant": tenant},
        **kw,
    }


def test_the_fleet_server_answers_another_tenant_while_a_large_answer_is_generated() -> None:
    with held_generation() as hook:
        server = FleetServer(AcceleratorPool.from_specs([SMALL], time_scale=0))
        with served(server) as url, httpx.Client(base_url=url, timeout=GUARD_S / 2) as client:
            big: dict[str, Any] = {}
            big_body = _body("big", tools=[TOOL], tool_choice="required", max_tokens=64)

            def ask_big() -> None:
                big["answer"] = client.post("/v1/chat/completions", json=big_body).json()

            asker = threading.Thread(target=ask_big)
            asker.start()
            assert hook.entered.wait(GUARD_S), "the big request's answer was never generated"
            small = client.post("/v1/chat/completions", json=_body("small", max_tokens=3))  # times out if blocked
            assert not hook.released.is_set()  # answered while the big answer was still being generated
            hook.release()
            asker.join(GUARD_S)
    assert small.json()["usage"]["completion_tokens"] == 3
    (choice,) = big["answer"]["choices"]
    assert choice["finish_reason"] == "length"
    assert big["answer"]["usage"]["completion_tokens"] == 64
    assert hook.released_in_time == [True]
    assert [name.split("_")[0] for name in hook.threads] == ["sim-answer"]  # a worker thread, not the loop's


async def test_an_in_process_deployment_serves_another_request_while_a_large_answer_is_generated() -> None:
    backend = SimulatedDeployment(SMALL, time_scale=0)
    big = InferenceRequest(
        request_id="big",
        tenant="big",
        model="small",
        messages=[{"role": "user", "content": "go"}],
        tools=[TOOL],
        tool_choice="required",
    )
    small = InferenceRequest(request_id="s", tenant="small", model="small", messages=big.messages, max_tokens=3)
    with held_generation() as hook:
        stream = backend.generate(big)
        first = asyncio.ensure_future(stream.__anext__())
        assert await asyncio.to_thread(hook.entered.wait, GUARD_S), "the big request's answer was never generated"
        small_events = [event async for event in backend.generate(small)]  # never ends if the loop is held
        assert not hook.released.is_set()
        hook.release()
        events = [await first] + [event async for event in stream]
    assert hook.released_in_time == [True]  # released by this test once the small request was served
    assert isinstance(small_events[-1], ComputeReceipt)
    assert small_events[-1].completion_tokens == 3
    assert isinstance(events[0], ToolCallDelta)
    assert isinstance(events[-1], ComputeReceipt)
    assert events[-1].finish_reason == "length"  # the answer's budget ran out before the schema was satisfied
    await backend.aclose()


async def test_a_request_stopped_while_its_answer_is_generated_never_runs() -> None:
    backend = SimulatedDeployment(SMALL, time_scale=0)
    request = InferenceRequest(
        request_id="gone",
        tenant="big",
        model="small",
        messages=[{"role": "user", "content": "go"}],
        tools=[TOOL],
        tool_choice="required",
    )
    with held_generation() as hook:
        stream = backend.generate(request)
        first = asyncio.ensure_future(stream.__anext__())
        assert await asyncio.to_thread(hook.entered.wait, GUARD_S)
        backend.cancel("gone")  # the gateway went away while the answer was being worked out
        hook.release()
        events = [await first] + [event async for event in stream]
    (receipt,) = events
    assert isinstance(receipt, ComputeReceipt)
    assert (receipt.finish_reason, receipt.chip_us, receipt.completion_tokens) == ("cancelled", 0, 0)
    assert backend.busy_chip_us() == {"small/0": ("trn2.3xlarge", 0), "small/1": ("trn2.3xlarge", 0)}
    await backend.aclose()


def test_only_plain_short_text_for_a_short_prompt_is_answered_on_the_loop() -> None:
    def request(content: Any = "hi", **kw: Any) -> InferenceRequest:
        return InferenceRequest(
            request_id="r", tenant="t", model="small", messages=[{"role": "user", "content": content}], **kw
        )

    assert light(request())
    assert light(request(max_tokens=1_000, response_format={"type": "text"}))
    heavy = [
        request(tools=[TOOL]),
        request(response_format={"type": "json_object"}),
        request(response_format="not a format"),
        request(max_tokens=1_001),
        request(parameters={"logprobs": True}),
        request("x" * 40_000),
        request([{"type": "text", "text": "hi"}]),
    ]
    assert not any(light(r) for r in heavy)
