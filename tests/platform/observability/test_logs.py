"""JSON logs: one object a line, with the request, tenant, key, run and trace ids, and never a key's secret."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from switchyard.platform.observability import JsonFormatter, redact, traced_run
from switchyard.platform.observability.logs import ContextFilter
from switchyard.platform.observability.tracing import configure_tracing, current_trace_id, shutdown_tracing

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def settings(settings: Any, otlp_receiver: Any) -> Any:
    return settings.model_copy(update={"otlp_endpoint": otlp_receiver.endpoint, "log_level": "debug"})


def _stream_handlers() -> Iterator[logging.StreamHandler[Any]]:
    """The stream handlers the app's logging configuration writes through (behind Litestar's queue handler)."""
    for handler in logging.getLogger().handlers:
        listener = getattr(handler, "listener", None)
        for inner in [handler, *(listener.handlers if listener is not None else [])]:
            if isinstance(inner, logging.StreamHandler):
                yield inner


@pytest.fixture
def captured(client: Any) -> Iterator[io.StringIO]:
    """What the app's log handlers write, from now on."""
    buffer = io.StringIO()
    handlers = list(_stream_handlers())
    assert handlers
    previous = [handler.setStream(buffer) for handler in handlers]
    yield buffer
    for handler, stream in zip(handlers, previous, strict=True):
        handler.setStream(stream)


async def _records(buffer: io.StringIO, request_id: str) -> list[dict[str, Any]]:
    """Every record written, once the access record of ``request_id`` is in (records are written by a thread)."""
    for _ in range(500):
        records = [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]
        if any(r.get("logger") == "switchyard.access" and r.get("request_id") == request_id for r in records):
            return records
        await asyncio.sleep(0.01)
    raise AssertionError(f"no access record of {request_id}: {buffer.getvalue()[-2000:]}")


def _secret(key: str) -> str:
    return key.split("_", 2)[2]


async def test_requests_carrying_real_keys_log_json_with_context_and_no_secret(
    client: Any, operator_key: str, captured: io.StringIO
) -> None:
    created = await client.post(
        "/v1/admin/tenants", json={"name": "logs"}, headers={"Authorization": f"Bearer {operator_key}"}
    )
    assert created.status_code == 201, created.text
    tenant_id, owner_key = created.json()["id"], created.json()["owner_key"]["value"]
    owner = {"Authorization": f"Bearer {owner_key}"}
    developer_key = (await client.post("/v1/api-keys", json={"role": "developer"}, headers=owner)).json()["value"]
    keys = [operator_key, owner_key, developer_key]

    chat = {"model": MODEL, "messages": [{"role": "user", "content": f"my key is {developer_key}"}], "max_tokens": 8}
    answer = await client.post("/v1/chat/completions", json=chat, headers={"Authorization": f"Bearer {developer_key}"})
    assert answer.status_code == 200, answer.text
    wrong = developer_key[:-4] + ("AAAA" if not developer_key.endswith("AAAA") else "BBBB")
    refused = await client.get("/v1/models", headers={"Authorization": f"Bearer {wrong}"})
    assert refused.status_code == 401
    # a key where a request id goes, and in the query string: both must be masked wherever they are logged
    echoed = await client.get(f"/v1/models?api_key={owner_key}", headers={**owner, "x-request-id": owner_key})
    assert echoed.status_code == 200
    last = await client.get("/healthz")

    records = await _records(captured, last.headers["x-request-id"])
    text = captured.getvalue()
    for key in keys:
        assert _secret(key) not in text
    assert _secret(wrong) not in text

    (access,) = [
        r for r in records if r["logger"] == "switchyard.access" and r["request_id"] == answer.headers["x-request-id"]
    ]
    assert access["message"] == "POST /v1/chat/completions 200"
    assert access["route"] == "/v1/chat/completions"
    assert access["status"] == 200
    assert access["tenant_id"] == tenant_id
    assert access["key_id"].startswith("key_")
    assert access["trace_id"] == answer.headers["x-trace-id"]
    assert access["level"] == "debug"  # one record per request only when debugging: metrics and spans cover the rest
    # the key sent as a request id is logged masked, its short id kept
    assert any(r.get("request_id", "").endswith("_[redacted]") for r in records)


async def test_an_agent_runs_records_carry_its_run_and_tenant_and_trace() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    logger = logging.getLogger("switchyard.test.run")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    seen: list[str | None] = []

    @traced_run
    async def execute(env: Any, *, tenant_id: str, run_id: str) -> str:
        seen.append(current_trace_id())
        logger.info("driving with key %s", "sy_abc123_" + "s" * 40)
        return "completed"

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    configure_tracing("", service="test", exporter=InMemorySpanExporter())
    try:
        assert await execute(None, tenant_id="ten_1", run_id="run_1") == "completed"
    finally:
        shutdown_tracing()
        logger.removeHandler(handler)
    (record,) = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert record["run_id"] == "run_1"
    assert record["tenant_id"] == "ten_1"
    assert record["trace_id"] == seen[0] is not None
    assert record["message"] == "driving with key sy_abc123_[redacted]"


def test_redaction_masks_keys_bearer_tokens_and_url_passwords_everywhere_in_a_record() -> None:
    key = "sy_k01abc_" + "Zz9-_" * 8
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("switchyard.test.redact")
    logger.addHandler(handler)
    try:
        try:
            raise ValueError(f"bad key {key}")
        except ValueError:
            logger.exception(
                "Authorization: Bearer %s to redis://user:hunter2@cache:6379/0",
                "opaque-token-123",
                extra={"header": f"Bearer {key}"},
            )
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    for secret in ("Zz9-_", "opaque-token-123", "hunter2"):
        assert secret not in text
    record = json.loads(text)
    assert record["message"] == "Authorization: Bearer [redacted] to redis://user:[redacted]@cache:6379/0"
    assert "sy_k01abc_[redacted]" in record["exception"]
    assert redact("nothing secret here") == "nothing secret here"
