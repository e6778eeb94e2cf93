"""No answer produces more than its budget hold covers (issue 22, finding 2), against a real upstream on 127.0.0.1
that ignores `max_tokens` and keeps talking: the gateway asks it for the call's most output tokens (the client's
`max_tokens`, else the platform's `SWITCHYARD_MAX_OUTPUT_TOKENS`), counts what it sends, text and tool-call
arguments alike, and cuts the answer there with `finish_reason: "length"` (a response: `incomplete`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from switchyard.accelerator.pool import count_prompt_tokens, count_tokens
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import BudgetReservation, UsageEvent
from tests.support.served import client_left, served

MODEL = "talker"
CHUNKS = 300  # what the upstream sends whatever it is asked: 3 tokens a chunk, 900 in all
PLATFORM_MAX_OUTPUT_TOKENS = 40
FORM = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"}}}}


class Overproducer:
    """An OpenAI-compatible upstream that ignores `max_tokens`: 900 tokens of text, or one tool call whose arguments
    are a list of 300 strings, streamed a few tokens a chunk or whole; its usage counts all it generated.

    A slow one (`seconds_per_chunk`) waits that long before each chunk (a whole answer: before all of them), and
    `first_chunk_after_s` more before the first; it stops when its client goes away."""

    def __init__(self, *, seconds_per_chunk: float = 0.0, first_chunk_after_s: float = 0.0) -> None:
        self.received: list[dict[str, Any]] = []
        self.seconds_per_chunk = seconds_per_chunk
        self.first_chunk_after_s = first_chunk_after_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body)
        self.received.append(request)
        pieces = (
            ['{"items": [', *(f'"item {n}", ' for n in range(CHUNKS)), '"last"]}']
            if request.get("tools")
            else [f" a{n} b{n} c{n}" for n in range(CHUNKS)]
        )
        usage = {"prompt_tokens": 9, "completion_tokens": 3 * CHUNKS, "total_tokens": 9 + 3 * CHUNKS}
        base = {"id": "over-1", "created": 0, "model": request["model"]}
        if request.get("stream"):
            chunks = [
                {**base, "object": "chat.completion.chunk", "choices": [self._delta(request, p, i)]}
                for i, p in enumerate(pieces)
            ]
            finish = "tool_calls" if request.get("tools") else "stop"
            chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            chunks.append({**base, "choices": [], "usage": usage})
            events = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]
            if self.seconds_per_chunk or self.first_chunk_after_s:
                await self._send_slowly(receive, send, events)
                return
            payload = b"".join(events)
            content_type = b"text/event-stream"
        else:
            pause = self.first_chunk_after_s + self.seconds_per_chunk * len(pieces)
            if pause and await client_left(receive, pause):
                return
            message: dict[str, Any] = {"role": "assistant", "content": None}
            if request.get("tools"):
                call = {"name": request["tools"][0]["function"]["name"], "arguments": "".join(pieces)}
                message["tool_calls"] = [{"id": "call_1", "type": "function", "function": call}]
            else:
                message["content"] = "".join(pieces)
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            payload = json.dumps({**base, "object": "chat.completion", "choices": [choice], "usage": usage}).encode()
            content_type = b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})
        await send({"type": "http.response.body", "body": payload})

    async def _send_slowly(self, receive: Any, send: Any, events: list[bytes]) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for index, event in enumerate(events):
            pause = self.seconds_per_chunk + (self.first_chunk_after_s if index == 0 else 0.0)
            if await client_left(receive, pause):
                return
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    def _delta(request: dict[str, Any], piece: str, index: int) -> dict[str, Any]:
        if not request.get("tools"):
            return {"index": 0, "delta": {"content": piece}, "finish_reason": None}
        call: dict[str, Any] = {"index": 0, "function": {"arguments": piece}}
        if index == 0:
            call |= {"id": "call_1", "type": "function", "function": {"name": "fill", "arguments": piece}}
        return {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}


@pytest.fixture
def upstream() -> Iterator[tuple[Overproducer, str]]:
    app = Overproducer()
    with served(app) as url:
        yield app, f"{url}/v1"


@pytest.fixture
def settings(database_url: str, tmp_path: Path, upstream: tuple[Overproducer, str], shared_apps: Any) -> Any:
    deployment = {"name": MODEL, "backend": "openai-compatible", "base_url": upstream[1], "context_window": 4096}
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"deployments": [deployment]}))
    return shared_apps.settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        fleet_file=str(path),
        max_output_tokens=PLATFORM_MAX_OUTPUT_TOKENS,
    )


async def _books(client: Any) -> tuple[list[UsageEvent], list[BudgetReservation]]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        usage = list((await session.execute(select(UsageEvent))).scalars())
        holds = list((await session.execute(select(BudgetReservation))).scalars())
    return usage, holds


def _answer(completion: dict[str, Any]) -> str:
    message = completion["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    return str(message["content"] or "") + "".join(call["function"]["arguments"] for call in calls)


def _streamed(lines: list[str]) -> tuple[str, str | None, dict[str, Any]]:
    """The text and tool-call arguments of a streamed completion, its finish reason and its usage."""
    text, finish, usage = "", None, {}
    for line in lines:
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[5:])
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            text += "".join(call["function"].get("arguments") or "" for call in delta.get("tool_calls") or ())
            finish = choice.get("finish_reason") or finish
    return text, finish, usage


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool-call"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_upstream_that_ignores_max_tokens_is_cut_at_it(
    client: Any, make_tenant: Any, upstream: tuple[Overproducer, str], stream: bool, tools: bool
) -> None:
    tenant = await make_tenant()
    await client.post("/v1/budgets", json={"limit_minor": 100, "currency": "USD"}, headers=tenant.headers())
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "Talk."}], "max_tokens": 16}
    if tools:
        body |= {"tools": [{"type": "function", "function": {"name": "fill", "parameters": FORM}}]}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        async with client.stream("POST", "/v1/chat/completions", json=body, headers=tenant.headers()) as answer:
            assert answer.status_code == 200
            text, finish, usage = _streamed([line async for line in answer.aiter_lines()])
    else:
        answer = await client.post("/v1/chat/completions", json=body, headers=tenant.headers())
        assert answer.status_code == 200, answer.text
        completion = answer.json()
        text, finish, usage = _answer(completion), completion["choices"][0]["finish_reason"], completion["usage"]

    assert upstream[0].received[-1]["max_tokens"] == 16
    assert finish == "length"
    assert usage["completion_tokens"] == 16
    assert 10 < count_tokens(text) <= 16  # counted a piece at a time as it came: never fewer than the text holds
    usage_events, holds = await _books(client)
    assert [event.completion_tokens for event in usage_events] == [16]
    assert [hold.status for hold in holds] == ["settled"]
    assert all(hold.actual_micros is not None and hold.actual_micros <= hold.amount_micros for hold in holds)


async def test_without_max_tokens_the_upstream_is_asked_for_the_platforms_most_and_cut_there(
    client: Any, make_tenant: Any, upstream: tuple[Overproducer, str]
) -> None:
    tenant = await make_tenant()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Talk."}]}
    answer = await client.post("/v1/chat/completions", json=body, headers=tenant.headers())

    assert answer.status_code == 200, answer.text
    completion = answer.json()
    assert upstream[0].received[-1]["max_tokens"] == PLATFORM_MAX_OUTPUT_TOKENS
    assert completion["choices"][0]["finish_reason"] == "length"
    assert completion["usage"]["completion_tokens"] == PLATFORM_MAX_OUTPUT_TOKENS
    assert count_tokens(_answer(completion)) == PLATFORM_MAX_OUTPUT_TOKENS


@pytest.mark.parametrize("asked", [16, None], ids=["max_output_tokens", "absent"])
async def test_a_response_on_an_upstream_that_keeps_talking_ends_incomplete_at_its_most_output_tokens(
    client: Any, make_tenant: Any, upstream: tuple[Overproducer, str], asked: int | None
) -> None:
    tenant = await make_tenant()
    await client.post("/v1/budgets", json={"limit_minor": 100, "currency": "USD"}, headers=tenant.headers())
    body: dict[str, Any] = {"model": MODEL, "input": "Talk."}
    if asked is not None:
        body["max_output_tokens"] = asked
    answer = await client.post("/v1/responses", json=body, headers=tenant.headers())

    assert answer.status_code == 200, answer.text
    response = answer.json()
    most = asked or PLATFORM_MAX_OUTPUT_TOKENS
    assert upstream[0].received[-1]["max_tokens"] == most
    assert (response["status"], response["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
    assert response["usage"]["output_tokens"] == most
    usage_events, holds = await _books(client)
    assert [event.completion_tokens for event in usage_events] == [most]
    assert all(hold.actual_micros is not None and hold.actual_micros <= hold.amount_micros for hold in holds)


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool-call"])
async def test_a_fleet_process_answer_past_the_ceiling_is_cut_and_its_receipt_still_read(tools: bool) -> None:
    """A simulated deployment on a fleet process: an answer longer than the call's ceiling is cut here, the request
    stopped on the fleet, and the compute receipt of what the fleet did is still read (the usage is billed)."""
    from switchyard.accelerator.pool import AcceleratorPool, DeploymentSpec, InferenceRequest, TextDelta, ToolCallDelta
    from switchyard.accelerator.pool.fleet_server import FleetServer
    from switchyard.accelerator.pool.types import ComputeReceipt
    from tests.support.served import served

    spec = DeploymentSpec(name="small", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4)
    tool = {"type": "function", "function": {"name": "fill", "parameters": FORM}}
    request = InferenceRequest(
        request_id="ceiling-1",
        tenant="t1",
        model="small",
        messages=[{"role": "user", "content": "Tell me everything about the fleet."}],
        tools=[tool] if tools else (),
        tool_choice="required" if tools else None,
        seed=7,
        output_ceiling=3,
    )
    with served(FleetServer(AcceleratorPool.from_specs([spec], time_scale=0))) as url:
        pool = AcceleratorPool.from_specs([spec], fleet_url=url)
        try:
            events = [event async for event in pool.submit(request)]
        finally:
            await pool.aclose()
    receipt = events[-1]
    assert isinstance(receipt, ComputeReceipt)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    text += "".join(e.call.arguments for e in events if isinstance(e, ToolCallDelta))
    assert (receipt.finish_reason, receipt.completion_tokens) == ("length", 3)
    assert count_tokens(text) <= 3
    assert receipt.chip_us > 0


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool-call"])
@pytest.mark.parametrize("on_fleet_process", [False, True], ids=["in-process", "fleet-process"])
async def test_the_simulated_model_stops_at_the_ceiling_without_max_tokens(tools: bool, on_fleet_process: bool) -> None:
    """The simulator itself generates no more than the call's ceiling when the client set no max_tokens (a text of
    its drawn length, a tool call of its schema's size, are cut there), so the compute it bills is within the hold."""
    from switchyard.accelerator.pool import AcceleratorPool, DeploymentSpec, InferenceRequest
    from switchyard.accelerator.pool.fleet_server import FleetServer
    from switchyard.accelerator.pool.types import ComputeReceipt
    from tests.support.served import served

    spec = DeploymentSpec(name="small", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4)
    bulky = {"type": "object", "properties": {"items": {"type": "array", "minItems": 500, "items": {"type": "string"}}}}
    messages = [{"role": "user", "content": "Tell me everything about the fleet."}]
    request = InferenceRequest(
        request_id="ceiling-2",
        tenant="t1",
        model="small",
        messages=messages,
        tools=[{"type": "function", "function": {"name": "fill", "parameters": bulky}}] if tools else (),
        tool_choice="required" if tools else None,
        seed=7,
        output_ceiling=5,
    )
    local = AcceleratorPool.from_specs([spec], time_scale=0)
    bound = local.backend("small").max_chip_us(count_prompt_tokens(messages, request.tools), 5)
    with served(FleetServer(AcceleratorPool.from_specs([spec], time_scale=0))) as url:
        pool = AcceleratorPool.from_specs([spec], fleet_url=url) if on_fleet_process else local
        try:
            receipt = [event async for event in pool.submit(request)][-1]
        finally:
            await pool.aclose()
    assert isinstance(receipt, ComputeReceipt)
    assert (receipt.finish_reason, receipt.completion_tokens) == ("length", 5)
    assert receipt.chip_us <= bound


async def test_when_the_context_window_is_the_bound_the_upstream_is_not_sent_max_tokens(
    client: Any, make_tenant: Any, upstream: tuple[Overproducer, str]
) -> None:
    """The window bounds the answer already, and a max_tokens of its whole room by our prompt estimate could pass
    the upstream's own bound (vLLM refuses that with a 400): the upstream is left to its window, and still cut."""
    client.app.state.settings.max_output_tokens = 100_000  # past the 4,096-token window: the window binds
    tenant = await make_tenant()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Talk."}]}
    answer = await client.post("/v1/chat/completions", json=body, headers=tenant.headers())

    assert answer.status_code == 200, answer.text
    assert "max_tokens" not in upstream[0].received[-1]
    assert answer.json()["usage"]["completion_tokens"] == 3 * CHUNKS  # all of it: 900 tokens fit the window
