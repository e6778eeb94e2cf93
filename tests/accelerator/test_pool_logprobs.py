"""Token logprobs through the pool: the simulator's synthetic ones, an upstream's passed on exactly (refusals too),
and the fleet process's carried across HTTP unchanged. Asking for logprobs changes neither answer nor compute."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.accelerator.pool import (
    AcceleratorPool,
    ComputeReceipt,
    DeploymentSpec,
    FleetServer,
    InferenceRequest,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    UpstreamError,
    complete,
)
from switchyard.accelerator.pool.echo_upstream import REFUSAL, REFUSAL_TRIGGER
from tests.support.served import served

SMALL = DeploymentSpec(name="small", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4, replicas=2)
QUESTION = [{"role": "user", "content": "how does the fleet batch requests?"}]


def _request(top: int | None, *, messages: list[dict[str, Any]] = QUESTION, **kw: Any) -> InferenceRequest:
    """A request for the sim with the client's parameters as the gateway passes them (``top=None``: no logprobs)."""
    parameters: dict[str, Any] = {
        key: kw[key] for key in ("max_tokens", "ignore_eos", "seed", "response_format", "tools") if key in kw
    }
    if top is not None:
        parameters |= {"logprobs": True, "top_logprobs": top}
    return InferenceRequest(
        request_id=kw.pop("request_id", "r1"),
        tenant="t",
        model=kw.pop("model", "small"),
        messages=messages,
        parameters=parameters,
        **kw,
    )


def _assert_sensible(token: str, logprob: TokenLogprob, top: int) -> None:
    assert logprob.token == token
    assert logprob.bytes == tuple(token.encode())
    assert logprob.logprob <= 0
    assert len(logprob.top_logprobs) == top
    tokens = [alternative.token for alternative in logprob.top_logprobs]
    assert len(set(tokens)) == len(tokens)  # distinct tokens
    if top:
        assert (tokens[0], logprob.top_logprobs[0].logprob) == (token, logprob.logprob)  # the chosen token leads
    for alternative in logprob.top_logprobs:
        assert alternative.logprob <= logprob.logprob <= 0
        assert alternative.bytes == tuple(alternative.token.encode())
        assert alternative.top_logprobs == ()
    assert sum(math.exp(a.logprob) for a in logprob.top_logprobs) <= 1 + 1e-6  # at most the whole mass


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), top=st.integers(0, 20), max_tokens=st.integers(1, 40))
def test_sim_logprobs_are_physically_sensible_and_reproducible(seed: int, top: int, max_tokens: int) -> None:
    completion = complete(_request(top, seed=seed, max_tokens=max_tokens, ignore_eos=True))
    assert len(completion.text_logprobs) == len(completion.text_tokens) == max_tokens
    for token, logprob in zip(completion.text_tokens, completion.text_logprobs, strict=True):
        _assert_sensible(token, logprob, top)
    assert complete(_request(top, seed=seed, max_tokens=max_tokens, ignore_eos=True)) == completion


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_asking_for_logprobs_changes_nothing_of_the_sims_answer(seed: int) -> None:
    plain = complete(_request(None, seed=seed))
    with_logprobs = complete(_request(4, seed=seed))
    assert plain.text_logprobs == ()
    assert (with_logprobs.text_tokens, with_logprobs.finish_reason) == (plain.text_tokens, plain.finish_reason)
    assert len(with_logprobs.text_logprobs) == len(plain.text_tokens)
    # logprobs: false (or top_logprobs alone, which the gateway refuses) asks for none
    silent = InferenceRequest("r", "t", "m", QUESTION, seed=seed, parameters={"logprobs": False, "top_logprobs": 2})
    assert complete(silent).text_logprobs == ()


def test_json_answers_have_logprobs_and_tool_calls_none() -> None:
    json_reply = complete(_request(2, seed=1, response_format={"type": "json_object"}))
    assert json.loads("".join(json_reply.text_tokens))
    for token, logprob in zip(json_reply.text_tokens, json_reply.text_logprobs, strict=True):
        _assert_sensible(token, logprob, 2)
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    called = complete(_request(2, seed=1, tools=[tool], tool_choice="required"))
    assert called.tool_calls
    assert called.text_logprobs == ()


async def _events(pool: AcceleratorPool, request: InferenceRequest) -> tuple[list[Any], ComputeReceipt]:
    events = [event async for event in pool.submit(request)]
    assert isinstance(events[-1], ComputeReceipt)
    return events[:-1], events[-1]


async def test_sim_deltas_carry_each_tokens_logprob_and_the_same_compute() -> None:
    plain_deltas, plain = await _events(AcceleratorPool.from_specs([SMALL], time_scale=0), _request(None, seed=9))
    deltas, receipt = await _events(AcceleratorPool.from_specs([SMALL], time_scale=0), _request(3, seed=9))
    assert [d.text for d in deltas] == [d.text for d in plain_deltas]
    assert all(d.logprobs == () for d in plain_deltas)
    assert [len(d.logprobs) for d in deltas] == [1] * len(deltas)
    assert [d.logprobs[0].token for d in deltas] == [d.text for d in deltas]
    assert (receipt.chip_us, receipt.prompt_tokens, receipt.completion_tokens) == (
        plain.chip_us,
        plain.prompt_tokens,
        plain.completion_tokens,
    )


def _upstream_pool(fake_upstream: Any) -> AcceleratorPool:
    spec = DeploymentSpec(name="up", backend="openai-compatible", base_url=fake_upstream.base_url, chips=2)
    return AcceleratorPool.from_specs([spec])


def _direct(fake_upstream: Any, body: dict[str, Any]) -> Any:
    """What the upstream answers when asked directly: whole, or its chunks' choices."""
    body = {"model": "up", **body}
    response = httpx.post(f"{fake_upstream.base_url}/chat/completions", json=body)
    response.raise_for_status()
    if not body.get("stream"):
        return response.json()["choices"][0]
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    return [choice for line in lines[:-1] for choice in json.loads(line)["choices"]]


def _wire(logprobs: tuple[TokenLogprob, ...]) -> list[dict[str, Any]]:
    return [token.wire() for token in logprobs]


@pytest.mark.parametrize("stream", [True, False])
async def test_an_upstreams_logprobs_pass_through_exactly(fake_upstream: Any, stream: bool) -> None:
    parameters = {"logprobs": True, "top_logprobs": 3}
    pool = _upstream_pool(fake_upstream)
    try:
        request = InferenceRequest("r1", "t", "up", QUESTION, parameters=parameters, stream=stream)
        deltas, receipt = await _events(pool, request)
    finally:
        await pool.aclose()
    direct = _direct(fake_upstream, {"messages": QUESTION, **parameters, "stream": stream})
    texts = [d for d in deltas if isinstance(d, TextDelta)]
    assert "".join(d.text for d in texts) == "w0 w1 w2 w3 w4"
    if stream:  # chunk by chunk: each delta holds its chunk's text and exactly its logprobs
        sent = [c for c in direct if c["delta"].get("content")]
        assert [(d.text, _wire(d.logprobs)) for d in texts] == [
            (c["delta"]["content"], c["logprobs"]["content"]) for c in sent
        ]
    else:
        assert [_wire(d.logprobs) for d in texts] == [direct["logprobs"]["content"]]
    assert all(len(t.top_logprobs) == 3 for d in texts for t in d.logprobs)
    assert receipt.completion_tokens == 5


@pytest.mark.parametrize("stream", [True, False])
async def test_an_upstreams_refusal_and_its_logprobs_are_carried(fake_upstream: Any, stream: bool) -> None:
    messages = [{"role": "user", "content": f"{REFUSAL_TRIGGER}, now"}]
    pool = _upstream_pool(fake_upstream)
    try:
        plain, _ = await _events(pool, InferenceRequest("r1", "t", "up", messages, parameters={}, stream=stream))
        parameters = {"logprobs": True, "top_logprobs": 1}
        asked = InferenceRequest("r2", "t", "up", messages, parameters=parameters, stream=stream)
        deltas, _ = await _events(pool, asked)
    finally:
        await pool.aclose()
    for events in (plain, deltas):
        assert all(isinstance(d, TextDelta) and d.text == "" and d.refusal for d in events)
        assert "".join(d.refusal for d in events) == REFUSAL
    assert all(d.logprobs == () for d in plain)
    direct = _direct(fake_upstream, {"messages": messages, **parameters, "stream": stream})
    refusal_logprobs = (
        [t for c in direct if c.get("logprobs") for t in c["logprobs"]["refusal"]]
        if stream
        else direct["logprobs"]["refusal"]
    )
    assert [t for d in deltas for t in _wire(d.logprobs)] == refusal_logprobs


async def test_logprobs_not_in_openais_shape_fail_the_answer() -> None:
    from switchyard.accelerator.pool.upstream_backend import _Answer

    answer = _Answer()
    chunk = {"choices": [{"delta": {"content": "hi"}, "logprobs": {"content": [{"logprob": -1.0}]}}]}
    with pytest.raises(UpstreamError, match="OpenAI's shape"):
        answer.read_chunk(chunk)


@pytest.fixture
def fleet_url() -> Iterator[str]:
    with served(FleetServer(AcceleratorPool.from_specs([SMALL], time_scale=0))) as url:
        yield url


@pytest.mark.parametrize("stream", [True, False])
async def test_the_fleet_process_carries_the_sims_logprobs_across(fleet_url: str, stream: bool) -> None:
    request = _request(5, seed=4, max_tokens=15, ignore_eos=True, stream=stream)
    local_deltas, local = await _events(AcceleratorPool.from_specs([SMALL], time_scale=0), request)
    remote_pool = AcceleratorPool.from_specs([SMALL], fleet_url=fleet_url)
    try:
        deltas, receipt = await _events(remote_pool, request)
        plain_deltas, plain = await _events(
            remote_pool, _request(None, seed=4, max_tokens=15, ignore_eos=True, stream=stream)
        )
    finally:
        await remote_pool.aclose()
    local_logprobs = [t for d in local_deltas for t in d.logprobs]
    assert len(local_logprobs) == 15
    assert [t for d in deltas for t in d.logprobs] == local_logprobs
    assert "".join(d.text for d in deltas) == "".join(d.text for d in local_deltas)
    assert all(d.logprobs == () for d in plain_deltas)
    assert not any(isinstance(d, ToolCallDelta) for d in deltas)
    # the plain request runs later in the fleet's simulated time, where its iterations' float times may round to
    # one chip-µs more or less (the same happens without logprobs: two identical requests in a row)
    assert receipt.completion_tokens == plain.completion_tokens
    assert abs(receipt.chip_us - plain.chip_us) <= 1
    assert (receipt.chip_us, receipt.completion_tokens) == (local.chip_us, local.completion_tokens)


def test_an_upstreams_logprobs_round_trip_exactly_also_without_bytes_and_far_below_the_top() -> None:
    from switchyard.accelerator.pool.upstream_backend import _Answer

    sent = [
        {"token": "<|eot|>", "logprob": -9999.0, "bytes": None, "top_logprobs": []},
        {
            "token": " é",
            "logprob": -0.1234567890123,
            "bytes": [32, 195, 169],
            "top_logprobs": [{"token": " e", "logprob": -2.5, "bytes": None}],
        },
    ]
    chunk = {"choices": [{"delta": {"content": " é"}, "logprobs": {"content": sent, "refusal": None}}]}
    (delta,) = _Answer().read_chunk(json.loads(json.dumps(chunk)))
    assert delta.text == " é"
    assert _wire(delta.logprobs) == sent
