"""A hard budget is a ceiling on an upstream billed by its wall time too (issue 22, finding 2): a call holds what its
most output tokens may take by the upstream's estimate (0.5 s and 0.05 s a token × its chips), and an upstream slower
than that is stopped when its measured compute reaches the hold (`finish_reason: "length"`, a response
`incomplete`), so what is billed never passes what was held. The upstream on 127.0.0.1 streams 3 tokens every
0.6 s (5 tokens a second), so the 16 tokens a call may produce would take 3.2 s against a hold of 1.3 s."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchyard.accelerator.pool import count_tokens
from tests.platform.inference.test_output_ceiling import Overproducer, _answer, _books, _streamed
from tests.support.served import served

MODEL = "slow"
SECONDS_PER_CHUNK = 0.6  # 3 tokens a chunk: 5 tokens a second
MAX_TOKENS = 16
UPSTREAM_TIMEOUT_S = 3  # the longest wait for a chunk (the hold of 16 tokens is shorter: 1.3 s)
MESSAGES = [{"role": "user", "content": "Talk."}]
HOLDS_LOG = "switchyard.platform.admission.budget_holds"


@pytest.fixture(params=[0.0, 5.0], ids=["paced", "late-first-token"])
def upstream(request: pytest.FixtureRequest) -> Iterator[tuple[Overproducer, str]]:
    app = Overproducer(seconds_per_chunk=SECONDS_PER_CHUNK, first_chunk_after_s=request.param)
    with served(app) as url:
        yield app, url + "/v1"


@pytest.fixture
def settings(database_url: str, tmp_path: Path, upstream: tuple[Overproducer, str], shared_apps: Any) -> Any:
    deployment = {"name": MODEL, "backend": "openai-compatible", "base_url": upstream[1], "context_window": 4096}
    deployment["timeout_s"] = UPSTREAM_TIMEOUT_S  # a whole answer of 900 tokens would take 3 minutes
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"deployments": [deployment]}))
    return shared_apps.settings(data_dir=tmp_path / "data", database_url=database_url, fleet_file=str(path))


async def _hard_budgeted_tenant(client: Any, make_tenant: Any) -> Any:
    tenant = await make_tenant()
    budget = {"limit_minor": 100, "currency": "USD", "hard": True}
    assert (await client.post("/v1/budgets", json=budget, headers=tenant.headers())).status_code == 201
    return tenant


async def _assert_billed_within_the_hold(client: Any, caplog: pytest.LogCaptureFixture, late: bool) -> None:
    usage_events, holds = await _books(client)
    [hold] = holds
    assert hold.status == "settled"
    assert [event.chip_us for event in usage_events] == [hold.actual_chip_us]
    assert hold.actual_chip_us is not None
    assert 0 < hold.actual_chip_us <= hold.estimated_chip_us
    assert hold.actual_micros is not None
    assert hold.actual_micros <= hold.amount_micros
    if late:  # nothing came before the ceiling: the call is billed the compute it held, all of it
        assert hold.actual_chip_us == hold.estimated_chip_us
    assert not [record for record in caplog.records if record.name == HOLDS_LOG and record.levelno >= logging.ERROR]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_slow_upstream_is_stopped_when_its_compute_reaches_the_hold(
    client: Any,
    make_tenant: Any,
    upstream: tuple[Overproducer, str],
    stream: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    late = upstream[0].first_chunk_after_s > 0
    tenant = await _hard_budgeted_tenant(client, make_tenant)
    body: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "max_tokens": MAX_TOKENS}
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

    assert finish == "length"
    assert usage["completion_tokens"] < MAX_TOKENS  # stopped by its compute, not by its tokens
    assert usage["completion_tokens"] == count_tokens(text)
    if late or not stream:  # nothing came before the ceiling (a whole answer comes all at once, after it)
        assert (text, usage["completion_tokens"]) == ("", 0)
    await _assert_billed_within_the_hold(client, caplog, late)


async def test_a_response_on_a_slow_upstream_ends_incomplete_within_its_hold(
    client: Any, make_tenant: Any, upstream: tuple[Overproducer, str], caplog: pytest.LogCaptureFixture
) -> None:
    late = upstream[0].first_chunk_after_s > 0
    tenant = await _hard_budgeted_tenant(client, make_tenant)
    body = {"model": MODEL, "input": "Talk.", "max_output_tokens": MAX_TOKENS}
    answer = await client.post("/v1/responses", json=body, headers=tenant.headers())

    assert answer.status_code == 200, answer.text
    response = answer.json()
    assert (response["status"], response["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
    assert response["usage"]["output_tokens"] < MAX_TOKENS
    await _assert_billed_within_the_hold(client, caplog, late)


@pytest.mark.parametrize("upstream", [0.0], ids=["paced"], indirect=True)
async def test_without_a_budget_a_slow_upstream_answers_to_its_most_output_tokens(
    client: Any, make_tenant: Any, upstream: tuple[Overproducer, str]
) -> None:
    """No hold, no compute ceiling: the call is bounded by its tokens alone, as before."""
    tenant = await make_tenant()
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": MAX_TOKENS, "stream": True}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=tenant.headers()) as answer:
        assert answer.status_code == 200
        text, finish, _ = _streamed([line async for line in answer.aiter_lines()])

    assert (finish, count_tokens(text)) == ("length", MAX_TOKENS)


@pytest.mark.parametrize("upstream", [0.0], ids=["paced"], indirect=True)
async def test_without_a_budget_an_upstream_past_its_timeout_is_a_503(
    client: Any, make_tenant: Any, upstream: tuple[Overproducer, str]
) -> None:
    """A whole answer of 900 tokens at 5 a second comes after the deployment's timeout: the upstream failed (it was
    a 500 internal_error), and nothing is billed."""
    tenant = await make_tenant()
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": MAX_TOKENS}
    answer = await client.post("/v1/chat/completions", json=body, headers=tenant.headers())

    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "upstream_error"
    assert "failed" in answer.json()["error"]["message"]
    usage_events, _ = await _books(client)
    assert usage_events == []
