"""/v1/embeddings through the app: the official client, metering once, admission refusals, deterministic vectors,
and passthrough to an openai-compatible upstream."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from sqlalchemy import func, select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import BudgetReservation, FleetBusy, UsageEvent
from tests.support.served import client_left, served

BGE = "BAAI/bge-large-en-v1.5"
QWEN = "Qwen/Qwen3-Embedding-8B"
CHAT = "meta-llama/Llama-3.1-8B-Instruct"


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    """The official client, over the app's in-process transport."""
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


async def _usage_events(client: Any) -> list[UsageEvent]:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


async def test_the_openai_client_embeds_in_floats_and_base64_and_each_call_is_metered_once(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    texts = ["The food was delicious.", "The waiter was kind.", "The food was delicious."]

    floats = await sdk.embeddings.create(model=QWEN, input=texts, encoding_format="float")
    packed = await sdk.embeddings.create(model=QWEN, input=texts)  # the client asks for base64 by default
    short = await sdk.embeddings.create(model=QWEN, input=texts[0], dimensions=256, encoding_format="float")

    assert floats.object == "list"
    assert floats.model == QWEN
    assert [d.index for d in floats.data] == [0, 1, 2]
    assert [len(d.embedding) for d in floats.data] == [4096] * 3
    assert floats.data[0].embedding == floats.data[2].embedding  # same text, same vector
    assert floats.data[0].embedding != floats.data[1].embedding
    assert abs(np.linalg.norm(floats.data[1].embedding) - 1) < 1e-5
    assert [d.embedding for d in packed.data] == [d.embedding for d in floats.data]  # decoded float32, exactly
    assert len(short.data[0].embedding) == 256
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 0

    await client.app.state.gateway.drain()
    events = await _usage_events(client)
    assert len(events) == 3
    assert all(e.completion_tokens == 0 and e.chip_us > 0 and e.tenant_id == tenant.id for e in events)
    assert sorted(e.prompt_tokens for e in events) == sorted(
        [floats.usage.prompt_tokens, packed.usage.prompt_tokens, short.usage.prompt_tokens]
    )
    await client.app.state.busy_recorder.flush()  # the replicas' busy time is what the receipts billed, exactly
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        busy = (await session.execute(select(func.sum(FleetBusy.chip_us)))).scalar_one()
    assert busy == sum(e.chip_us for e in events)


async def test_the_answer_is_openais_shape_with_compute_and_the_chip_us_header(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = {"model": BGE, "input": [[101, 2023, 102], [7592]], "encoding_format": "base64", "user": "u-1"}
    response = await client.post("/v1/embeddings", json=body, headers=tenant.headers("developer"))
    assert response.status_code == 200, response.text
    answer = response.json()
    compute = answer["usage"]["compute"]
    assert set(answer["usage"]) == {"prompt_tokens", "total_tokens", "compute"}
    assert answer["usage"]["prompt_tokens"] == 3 + 1
    assert int(response.headers["x-switchyard-chip-us"]) == compute["chip_us"] > 0
    assert compute["decode_ms"] == 0
    assert response.headers["x-switchyard-instance-type"] == compute["instance_type"] == "trn2.48xlarge"
    assert int(response.headers["x-ratelimit-remaining-tokens"]) >= 0  # admitted like a chat completion
    vector = np.frombuffer(base64.b64decode(answer["data"][0]["embedding"]), dtype="<f4")
    assert vector.shape == (1024,)
    assert abs(float(np.linalg.norm(vector)) - 1) < 1e-5

    await client.app.state.gateway.drain()
    (event,) = await _usage_events(client)
    assert (event.chip_us, event.prompt_tokens, event.completion_tokens) == (compute["chip_us"], 4, 0)
    assert event.model == BGE


async def test_one_array_of_token_ids_is_one_input(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = {"model": BGE, "input": [101, 7592, 2088, 102], "encoding_format": "float"}
    response = await client.post("/v1/embeddings", json=body, headers=tenant.headers("developer"))
    assert response.status_code == 200, response.text
    assert len(response.json()["data"]) == 1
    assert response.json()["usage"]["prompt_tokens"] == 4


async def test_models_say_their_task_and_each_kind_refuses_the_other_call(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    listed = (await client.get("/v1/models", headers=headers)).json()
    tasks = {m["id"]: m["task"] for m in listed["data"]}
    assert (tasks[BGE], tasks[QWEN], tasks[CHAT]) == ("embeddings", "embeddings", "chat")
    assert (await client.get(f"/v1/models/{BGE}", headers=headers)).json()["task"] == "embeddings"

    chat = {"model": BGE, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    refused_chat = await client.post("/v1/chat/completions", json=chat, headers=headers)
    embed = {"model": CHAT, "input": "hi"}
    refused_embed = await client.post("/v1/embeddings", json=embed, headers=headers)
    for refused, wrong in ((refused_chat, BGE), (refused_embed, CHAT)):
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert (error["param"], error["code"]) == ("model", "model_not_supported")
        assert wrong in error["message"]
    await client.app.state.gateway.drain()
    assert await _usage_events(client) == []


async def test_an_agent_cannot_be_made_on_an_embedding_model(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    refused = await client.post("/v1/agents", json={"name": "a", "model": BGE}, headers=tenant.headers("developer"))
    assert refused.status_code == 400, refused.text
    assert (refused.json()["error"]["param"], refused.json()["error"]["code"]) == ("model", "model_not_supported")


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"model": BGE, "input": "word " * 600}, "input", "context_length_exceeded"),
        ({"model": BGE, "input": "hi", "dimensions": 256}, "dimensions", "invalid_value"),
        ({"model": QWEN, "input": "hi", "dimensions": 8192}, "dimensions", "invalid_value"),
        ({"model": QWEN, "input": ""}, "input", None),
        ({"model": QWEN, "input": []}, "input", None),
        ({"model": QWEN, "input": "hi", "encoding_format": "int8"}, "encoding_format", None),
    ],
)
async def test_inputs_the_model_cannot_encode_are_refused_naming_the_field(
    client: Any, make_tenant: Any, body: dict[str, Any], param: str, code: str | None
) -> None:
    tenant = await make_tenant()
    refused = await client.post("/v1/embeddings", json=body, headers=tenant.headers("developer"))
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert param in str(error["param"])
    if code is not None:
        assert error["code"] == code
    await client.app.state.gateway.drain()
    assert await _usage_events(client) == []


async def test_an_unknown_model_is_404(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    refused = await client.post("/v1/embeddings", json={"model": "nope", "input": "hi"}, headers=tenant.headers())
    assert refused.status_code == 404, refused.text
    assert refused.json()["error"]["param"] == "model"


async def test_admission_refuses_a_call_over_the_token_limit_and_over_budget(
    client: Any, make_tenant: Any, settings: Any
) -> None:
    settings.tenant_tokens_per_minute = 1_000
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    too_many = await client.post("/v1/embeddings", json={"model": BGE, "input": ["w " * 400] * 3}, headers=headers)
    assert too_many.status_code == 400, too_many.text
    assert too_many.json()["error"]["code"] == "request_exceeds_token_limit"

    settings.tenant_tokens_per_minute = 10_000_000
    budget = await client.post("/v1/budgets", json={"limit_minor": 1, "currency": "USD"}, headers=tenant.headers())
    assert budget.status_code == 201, budget.text
    small = await client.post("/v1/embeddings", json={"model": QWEN, "input": "hi"}, headers=headers)
    assert small.status_code == 200, small.text  # fits the one cent
    long_input = {"model": QWEN, "input": [list(range(30_000))] * 3}  # ~24 chip-seconds, above one cent
    refused = await client.post("/v1/embeddings", json=long_input, headers=headers)
    assert refused.status_code == 402, refused.text
    assert refused.json()["error"]["code"] == "budget_exceeded"

    await client.app.state.gateway.drain()
    assert [e.prompt_tokens for e in await _usage_events(client)] == [small.json()["usage"]["prompt_tokens"]]


class RecordingEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` upstream that records what it was sent (a real server); a slow one
    answers ``answer_after_s`` late, unless its client went away by then."""

    def __init__(self, answer_after_s: float = 0.0) -> None:
        self.received: list[dict[str, Any]] = []
        self.answer_after_s = answer_after_s

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
        self.received.append(
            request | {"path": scope["path"], "authorization": dict(scope["headers"])[b"authorization"]}
        )
        inputs = request["input"] if isinstance(request["input"], list) else [request["input"]]
        size = request.get("dimensions") or 3
        data = [{"object": "embedding", "index": i, "embedding": [float(i + 1)] * size} for i in range(len(inputs))]
        data.reverse()  # an upstream may answer out of order: the index says which input a vector is for
        answer = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": request["model"],
                "usage": {"prompt_tokens": 7, "total_tokens": 7},
            }
        )
        if self.answer_after_s and await client_left(receive, self.answer_after_s):
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer.encode()})


@pytest.fixture
def upstream(request: pytest.FixtureRequest) -> Iterator[tuple[RecordingEmbedder, str]]:
    app = RecordingEmbedder(answer_after_s=getattr(request, "param", 0.0))
    with served(app) as url:
        yield app, f"{url}/v1"


@pytest.fixture
def settings(database_url: str, tmp_path: Path, request: pytest.FixtureRequest, shared_apps: Any) -> Any:
    fleet_file = ""
    if "upstream" in request.fixturenames:
        _app, base_url = request.getfixturevalue("upstream")
        path = tmp_path / "fleet.json"
        deployment = {
            "name": "remote-embedder",
            "backend": "openai-compatible",
            "task": "embeddings",
            "base_url": base_url,
            "upstream_model": "intfloat/e5-large-v2",
            "api_key": "upstream-secret",
            "chips": 2,
            "context_window": 512,
        }
        path.write_text(json.dumps({"deployments": [deployment]}))
        fleet_file = str(path)
    return shared_apps.settings(data_dir=tmp_path / "data", database_url=database_url, fleet_file=fleet_file)


async def test_an_openai_compatible_upstream_receives_the_call_and_its_wall_time_is_metered(
    client: Any, make_tenant: Any, upstream: tuple[RecordingEmbedder, str]
) -> None:
    recorder, _url = upstream
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    answer = await sdk.embeddings.create(model="remote-embedder", input=["a", "b"], dimensions=5, user="end-user")

    (sent,) = recorder.received
    assert sent["path"] == "/v1/embeddings"
    assert sent["authorization"] == b"Bearer upstream-secret"
    assert {k: sent[k] for k in ("model", "input", "dimensions", "user", "encoding_format")} == {
        "model": "intfloat/e5-large-v2",
        "input": ["a", "b"],
        "dimensions": 5,
        "user": "end-user",
        "encoding_format": "float",
    }
    assert [d.embedding for d in answer.data] == [[1.0] * 5, [2.0] * 5]  # in input order, base64 round trip
    assert answer.usage.prompt_tokens == 7

    await client.app.state.gateway.drain()
    (event,) = await _usage_events(client)
    assert (event.model, event.prompt_tokens, event.completion_tokens) == ("remote-embedder", 7, 0)
    assert event.chip_us > 0
    assert event.chip_us % 2 == 0  # wall time x the two chips the operator declared


@pytest.mark.parametrize("upstream", [5.0], ids=["slow"], indirect=True)
async def test_a_held_embedding_call_on_a_slow_upstream_is_stopped_at_its_hold_unbilled(
    client: Any, make_tenant: Any, upstream: tuple[RecordingEmbedder, str]
) -> None:
    """An upstream billed by wall time holds ~0.5 s × its chips for a short input; one that answers 5 s late would
    settle ten times past a hard budget's hold. It is stopped at the hold instead: 503 upstream_error naming it,
    nothing billed (no part of the vectors is an answer), the hold given back."""
    tenant = await make_tenant()
    budget = {"limit_minor": 100, "currency": "USD", "hard": True}
    assert (await client.post("/v1/budgets", json=budget, headers=tenant.headers())).status_code == 201
    body = {"model": "remote-embedder", "input": ["a"]}
    answer = await client.post("/v1/embeddings", json=body, headers=tenant.headers())

    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "upstream_error"
    assert "budget hold" in error["message"]
    for _ in range(1000):  # the hold is given back after the error is answered (by the app's loop, not this one)
        if client.app.state.gateway.running == 0:
            break
        await asyncio.sleep(0.01)
    assert await _usage_events(client) == []
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        holds = list((await session.execute(select(BudgetReservation))).scalars())
    assert [hold.status for hold in holds] == ["released"]
