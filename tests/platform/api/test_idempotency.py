"""Idempotency-Key on POST: replay, reuse with another body (422), in flight (409), per tenant."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from switchyard.platform.db import UNSCOPED, new_id
from switchyard.platform.models import IdempotencyRecord


async def _members(client: Any, tenant: Any) -> int:
    return len((await client.get("/v1/members?limit=100", headers=tenant.headers())).json()["data"])


async def test_retry_replays_the_first_response_and_creates_nothing_new(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = {**tenant.headers(), "Idempotency-Key": "create-ada"}
    first = await client.post("/v1/members", json={"email": "ada@x.io"}, headers=headers)
    second = await client.post("/v1/members", json={"email": "ada@x.io"}, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    assert second.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert await _members(client, tenant) == 2


async def test_same_key_with_a_different_body_is_422(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = {**tenant.headers(), "Idempotency-Key": "k1"}
    assert (await client.post("/v1/members", json={"email": "a@x.io"}, headers=headers)).status_code == 201
    reused = await client.post("/v1/members", json={"email": "b@x.io"}, headers=headers)
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    assert await _members(client, tenant) == 2


async def test_key_in_flight_is_409_and_an_abandoned_claim_is_taken_over(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = b'{"email": "c@x.io"}'
    import hashlib

    digest = hashlib.sha256(b"\n".join([b"/v1/members", b"", body])).hexdigest()
    now = datetime.now(UTC)
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        session.add(
            IdempotencyRecord(
                id=new_id("idem"), owner=tenant.id, key="busy", request_sha256=digest, expires_at=now + timedelta(1)
            )
        )
        session.add(
            IdempotencyRecord(
                id=new_id("idem"),
                owner=tenant.id,
                key="crashed",
                request_sha256=digest,
                created_at=now - timedelta(hours=1),
                expires_at=now + timedelta(1),
            )
        )
    headers = {**tenant.headers(), "content-type": "application/json"}
    busy = await client.post("/v1/members", content=body, headers={**headers, "Idempotency-Key": "busy"})
    assert busy.status_code == 409
    assert busy.json()["error"]["code"] == "idempotency_key_in_flight"
    assert await _members(client, tenant) == 1
    retaken = await client.post("/v1/members", content=body, headers={**headers, "Idempotency-Key": "crashed"})
    assert retaken.status_code == 201
    assert await _members(client, tenant) == 2


async def test_keys_are_per_tenant(client: Any, make_tenant: Any) -> None:
    a, b = await make_tenant(), await make_tenant()
    for tenant in (a, b):
        response = await client.post(
            "/v1/members", json={"email": "same@x.io"}, headers={**tenant.headers(), "Idempotency-Key": "shared"}
        )
        assert response.status_code == 201
        assert "idempotent-replayed" not in response.headers
    assert await _members(client, a) == await _members(client, b) == 2


async def test_client_errors_are_replayed_but_server_errors_are_not_stored(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = {**tenant.headers(), "Idempotency-Key": "dup"}
    await client.post("/v1/members", json={"email": "d@x.io"}, headers=tenant.headers())
    conflict = await client.post("/v1/members", json={"email": "d@x.io"}, headers=headers)
    again = await client.post("/v1/members", json={"email": "d@x.io"}, headers=headers)
    assert conflict.status_code == again.status_code == 409
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == conflict.json()


async def test_the_answer_is_stored_before_its_last_bytes_reach_the_client(client: Any, make_tenant: Any) -> None:
    # A client may retry the moment it has the answer; the retry must then be a replay, never a 409.
    tenant = await make_tenant()
    body = json.dumps({"email": "late@x.io"}).encode()
    headers = [
        (b"host", b"switchyard.test"),
        (b"authorization", tenant.headers()["Authorization"].encode()),
        (b"idempotency-key", b"late"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/members",
        "raw_path": b"/v1/members",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("switchyard.test", 80),
    }
    stored_when_done: list[int | None] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            async with client.app.state.database.unit_of_work(UNSCOPED) as session:
                found = select(IdempotencyRecord).where(IdempotencyRecord.key == "late")
                stored_when_done.append((await session.execute(found)).scalar_one().status_code)

    await client.app(scope, receive, send)
    assert stored_when_done == [201]
