"""Retries with one idempotency key, errors after the retries, and run streams that resume where they broke."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from switchyard.sdk import (
    APIConnectionError,
    APITimeoutError,
    BadRequestError,
    ConflictError,
    RateLimitError,
    Switchyard,
)
from tests.sdk.conftest import MODEL, Installation
from tests.sdk.servers import CuttingProxy, Scripted, scripted_server
from tests.sdk.test_sdk_runs import CALCULATOR, new_tenant_key
from tests.support.ports import free_port

THREAD = {"object": "thread", "id": "thr_1", "created_at": "2026-12-03T00:00:00Z", "metadata": {}}


def _error(code: str, status_type: str = "api_error") -> dict[str, object]:
    return {"error": {"message": code, "type": status_type, "param": None, "code": code}}


def test_a_post_is_retried_with_the_same_idempotency_key() -> None:
    script = Scripted(
        [
            (429, {"retry-after": "0"}, _error("rate_limit_exceeded")),
            (503, {}, _error("upstream_unavailable")),
            (409, {"retry-after": "0"}, _error("idempotency_key_in_flight")),
            (201, {}, THREAD),
        ]
    )
    with scripted_server(script) as url, Switchyard(api_key="sy_test", base_url=url, max_retries=3) as client:
        thread = client.threads.create()
    assert thread.id == "thr_1"
    keys = {headers["idempotency-key"] for _, _, headers in script.seen}
    assert len(script.seen) == 4
    assert len(keys) == 1
    assert {headers["authorization"] for _, _, headers in script.seen} == {"Bearer sy_test"}


def test_what_is_not_retried_and_what_the_last_failure_says() -> None:
    script = Scripted(
        [
            (400, {}, _error("invalid_value", "invalid_request_error")),
            (409, {}, _error("run_active", "conflict_error")),
            (429, {"retry-after": "7"}, _error("rate_limit_exceeded", "rate_limit_error")),
        ]
    )
    with scripted_server(script) as url, Switchyard(api_key="sy_test", base_url=url, max_retries=0) as client:
        with pytest.raises(BadRequestError) as bad:
            client.threads.create()
        with pytest.raises(ConflictError):
            client.threads.create()
        with pytest.raises(RateLimitError) as limited:
            client.threads.create()
    assert bad.value.code == "invalid_value"
    assert limited.value.retry_after_s == 7.0
    assert len(script.seen) == 3


def test_unreachable_and_slow_apis_raise_connection_errors() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with Switchyard(api_key="sy_test", base_url=url, max_retries=1) as client, pytest.raises(APIConnectionError):
        client.agents.list()
    script = Scripted([(200, {}, {})] * 2, delay_s=1.0)
    with (
        scripted_server(script) as url,
        Switchyard(api_key="sy_test", base_url=url, max_retries=1, timeout_s=0.2) as client,
        pytest.raises(APITimeoutError),
    ):
        client.agents.list()
    assert len(script.seen) == 2


@pytest.fixture
def proxy(installation: Installation) -> Iterator[CuttingProxy]:
    proxy = CuttingProxy(urlsplit(installation.base_url).port or 80)
    yield proxy
    proxy.close()


@pytest.mark.slow
def test_a_run_stream_cut_after_its_first_event_resumes_without_loss(
    installation: Installation, proxy: CuttingProxy
) -> None:
    url = f"http://127.0.0.1:{proxy.port}/v1"
    with Switchyard(api_key=new_tenant_key(installation), base_url=url) as client:
        agent = client.agents.create(name="maths", model=MODEL, tools=CALCULATOR)
        thread = client.threads.create(messages=[{"content": "use the calculator expression=5*5"}])
        with client.threads.runs.stream(thread.id, agent_id=agent.id) as stream:
            events = list(stream)
        assert proxy.cut.is_set()
        assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))
        assert events[-1].event == "thread.run.completed"
        assert f"GET /v1/threads/{thread.id}/runs/{stream.run_id}/events?starting_after=1" in proxy.requests
        assert client.threads.runs.retrieve(thread.id, str(stream.run_id)).status == "completed"
