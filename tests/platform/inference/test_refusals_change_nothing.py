"""A refused chat completion changes nothing: what earlier checks took (the key's request rate, the tenant's
tokens, a request slot) is given back, whichever later check refuses, with the limiters in-process or in Redis.

The rates refill while a test runs, so "unchanged" is asserted as "no lower than before, less only what the
admitted requests took": the refused requests of each test would have taken many times what a test's run time
refills.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchyard.platform.limits import ConcurrencyLimiter, RedisConcurrency, tenant_limit_key

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
REFUSED = 8


def _chat(max_tokens: int = 8, content: str = "hi") -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def limiters(request: pytest.FixtureRequest) -> str | None:
    """Where the limiters live: this process, or the test Redis (``SWITCHYARD_TEST_REDIS_URL``)."""
    if request.param == "memory":
        return None
    return str(request.getfixturevalue("redis_url"))


@pytest.fixture
def settings(database_url: str, tmp_path: Path, limiters: str | None, shared_apps: Any) -> Any:
    return shared_apps.settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        redis_url=limiters,
        key_requests_per_minute=12,  # one request every 5 s
        tenant_tokens_per_minute=50_000,
    )


def _remaining(response: httpx.Response, kind: str) -> int:
    return int(response.headers[f"x-ratelimit-remaining-{kind}"])


@pytest.fixture
async def slots(client: Any, limiters: str | None) -> AsyncIterator[ConcurrencyLimiter]:
    """The app's request slots, as this test's event loop can take them (the app runs on a loop of its own)."""
    if limiters is None:
        yield client.app.state.gateway.admission.slots
        return
    import redis.asyncio as redis

    connection = redis.Redis.from_url(limiters)
    yield RedisConcurrency(connection)
    await connection.aclose()


async def test_requests_refused_for_concurrency_use_no_quota(
    client: Any, make_tenant: Any, settings: Any, slots: ConcurrencyLimiter
) -> None:
    settings.tenant_max_concurrency = 1
    settings.tenant_tokens_per_minute = 600  # ten a second: the refused requests would take a minute's worth
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    before = await client.post("/v1/chat/completions", json=_chat(), headers=headers)
    assert before.status_code == 200, before.text
    cost = 600 - _remaining(before, "tokens")  # what one request of this shape takes (give or take one)
    assert await slots.acquire(tenant_limit_key(tenant.id), 1, "another-request")  # the tenant's only slot

    for _ in range(REFUSED):
        refused = await client.post("/v1/chat/completions", json=_chat(), headers=headers)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "concurrency_limit_exceeded"

    await slots.release(tenant_limit_key(tenant.id), "another-request")
    after = await client.post("/v1/chat/completions", json=_chat(), headers=headers)
    assert after.status_code == 200, after.text
    assert _remaining(after, "requests") >= _remaining(before, "requests") - 1
    assert _remaining(after, "tokens") >= _remaining(before, "tokens") - cost - 1


async def test_requests_refused_by_a_budget_use_no_quota(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    budget = await client.post("/v1/budgets", json={"limit_minor": 1, "currency": "USD"}, headers=tenant.headers())
    assert budget.status_code == 201, budget.text
    before = await client.post("/v1/chat/completions", json=_chat(max_tokens=1), headers=headers)
    assert before.status_code == 200, before.text  # one token fits the budget

    for _ in range(REFUSED):  # each would take ~4,000 tokens and a request
        refused = await client.post("/v1/chat/completions", json=_chat(max_tokens=4_000), headers=headers)
        assert refused.status_code == 402, refused.text
        assert refused.json()["error"]["code"] == "budget_exceeded"

    await client.app.state.gateway.drain()
    after = await client.post("/v1/chat/completions", json=_chat(max_tokens=1), headers=headers)
    assert after.status_code == 200, after.text
    assert _remaining(after, "requests") >= _remaining(before, "requests") - 1
    cost = _remaining(before, "tokens") - _remaining(after, "tokens")
    assert cost <= 10, f"the tenant's tokens went down by {cost}, not by one small request's"


async def test_a_token_rate_refusal_gives_the_key_its_request_back(
    client: Any, make_tenant: Any, settings: Any
) -> None:
    settings.tenant_tokens_per_minute = 40
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    before = await client.post("/v1/chat/completions", json=_chat(max_tokens=4), headers=headers)
    assert before.status_code == 200, before.text
    assert _remaining(before, "tokens") < 30  # what is left cannot take the larger requests below

    for _ in range(REFUSED):
        refused = await client.post("/v1/chat/completions", json=_chat(max_tokens=30), headers=headers)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "tokens_per_minute_exceeded"

    after = await client.post("/v1/chat/completions", json=_chat(max_tokens=1), headers=headers)
    assert after.status_code == 200, after.text
    assert _remaining(after, "requests") >= _remaining(before, "requests") - 1


@pytest.mark.parametrize(
    ("body", "param"),
    [(_chat(max_tokens=200), "max_tokens"), (_chat(max_tokens=1, content="word " * 150), "messages")],
)
async def test_a_request_larger_than_the_whole_token_limit_is_400_and_takes_nothing(
    client: Any, make_tenant: Any, settings: Any, body: dict[str, Any], param: str
) -> None:
    settings.tenant_tokens_per_minute = 100
    settings.key_requests_per_minute = 1
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    refused = await client.post("/v1/chat/completions", json=body, headers=headers)
    assert refused.status_code == 400, refused.text
    assert "retry-after" not in refused.headers  # no wait would help
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("request_exceeds_token_limit", param)
    assert error["type"] == "invalid_request_error"
    assert "100 tokens per minute" in error["message"]
    assert "can never" in error["message"]
    admitted = await client.post("/v1/chat/completions", json=_chat(max_tokens=80), headers=headers)
    assert admitted.status_code == 200, admitted.text  # the key's only request and most of the tokens were left
    assert _remaining(admitted, "requests") == 0
