"""Idempotency-Key on POST: replay, 422 on another body, 409 in flight; per API key, authorized first, audited,
2xx only, sealed at rest, with the outcome's headers."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from sqlalchemy import select
from sqlmodel import col

from switchyard.platform.auth.keys import parse_key
from switchyard.platform.db import UNSCOPED, new_id
from switchyard.platform.http.replay_seal import StoredAnswer, seal, unseal
from switchyard.platform.models import ApiKey, IdempotencyRecord

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _idempotent(headers: dict[str, str], key: str | None = None) -> dict[str, str]:
    return {**headers, "Idempotency-Key": key or str(uuid.uuid4())}


async def _members(client: Any, tenant: Any) -> int:
    return len((await client.get("/v1/members?limit=100", headers=tenant.headers())).json()["data"])


async def _records(client: Any) -> list[IdempotencyRecord]:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(IdempotencyRecord))).scalars())


async def _key_id(client: Any, plaintext: str) -> str:
    parsed = parse_key(plaintext)
    assert parsed is not None
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        found = select(ApiKey).where(col(ApiKey.short_id) == parsed.short_id)
        key: ApiKey = (await session.execute(found)).scalar_one()
        return key.id


def _digest(path: str, body: bytes) -> str:
    return hashlib.sha256(b"\n".join([path.encode(), b"", body])).hexdigest()


async def test_retry_replays_the_first_response_and_creates_nothing_new(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = _idempotent(tenant.headers())
    first = await client.post("/v1/members", json={"email": "ada@x.io"}, headers=headers)
    second = await client.post("/v1/members", json={"email": "ada@x.io"}, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    assert second.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert second.headers["x-request-id"] != first.headers["x-request-id"]  # a request id names one request
    assert await _members(client, tenant) == 2


async def test_same_key_with_a_different_body_is_422(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = _idempotent(tenant.headers())
    assert (await client.post("/v1/members", json={"email": "a@x.io"}, headers=headers)).status_code == 201
    reused = await client.post("/v1/members", json={"email": "b@x.io"}, headers=headers)
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    assert await _members(client, tenant) == 2


async def test_key_in_flight_is_409_and_an_abandoned_claim_is_taken_over(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = b'{"email": "c@x.io"}'
    key_id = await _key_id(client, tenant.keys["owner"])
    now = datetime.now(UTC)
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        for key, created_at in (("busy", now), ("crashed", now - timedelta(hours=1))):
            session.add(
                IdempotencyRecord(
                    id=new_id("idem"),
                    api_key_id=key_id,
                    key=key,
                    request_sha256=_digest("/v1/members", body),
                    created_at=created_at,
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


async def test_keys_are_per_api_key_so_another_key_of_the_same_tenant_makes_a_new_request(
    client: Any, make_tenant: Any
) -> None:
    tenant, other = await make_tenant(), await make_tenant()
    key = str(uuid.uuid4())
    answers = [
        await client.post("/v1/chat/completions", json=CHAT, headers=_idempotent(who.headers(role), key))
        for who, role in ((tenant, "owner"), (tenant, "developer"), (other, "owner"))
    ]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert not any("idempotent-replayed" in a.headers for a in answers)
    assert len({a.json()["id"] for a in answers}) == 3  # three completions, none handed to another key


async def test_a_viewer_sending_an_owners_key_and_body_is_refused_and_sees_no_secret(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    key = str(uuid.uuid4())
    created = await client.post("/v1/api-keys", json={"role": "admin"}, headers=_idempotent(tenant.headers(), key))
    assert created.status_code == 201
    stolen = await client.post(
        "/v1/api-keys", json={"role": "admin"}, headers=_idempotent(tenant.headers("viewer"), key)
    )
    assert stolen.status_code == 403
    assert created.json()["value"] not in stolen.text
    assert "idempotent-replayed" not in stolen.headers


async def test_authorization_is_checked_before_a_stored_answer_is_replayed(client: Any, make_tenant: Any) -> None:
    # Even an answer stored for this very key is not replayed to it when the route refuses the key.
    tenant = await make_tenant()
    viewer = tenant.keys["viewer"]
    parsed = parse_key(viewer)
    assert parsed is not None
    body = json.dumps({"role": "admin"}).encode()
    record_id = new_id("idem")
    answer = StoredAnswer([("content-type", "application/json")], b'{"value": "sy_leaked"}')
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        session.add(
            IdempotencyRecord(
                id=record_id,
                api_key_id=await _key_id(client, viewer),
                key="stored",
                request_sha256=_digest("/v1/api-keys", body),
                status_code=201,
                response_sealed=seal(answer, secret=parsed.secret, record_id=record_id, status=201),
                expires_at=datetime.now(UTC) + timedelta(1),
            )
        )
    headers = {**tenant.headers("viewer"), "content-type": "application/json", "Idempotency-Key": "stored"}
    refused = await client.post("/v1/api-keys", content=body, headers=headers)
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "permission_error"
    assert "sy_leaked" not in refused.text


async def test_every_replay_is_audited_in_the_callers_log(
    client: Any, make_tenant: Any, operator_headers: dict[str, str]
) -> None:
    tenant = await make_tenant()
    headers = _idempotent(tenant.headers("developer"))
    first = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    for _ in range(2):
        assert (await client.post("/v1/chat/completions", json=CHAT, headers=headers)).json() == first.json()
    log = (await client.get("/v1/audit-log?action=request.replay", headers=tenant.headers())).json()["data"]
    assert len(log) == 2
    assert log[0]["actor"] == await _key_id(client, tenant.keys["developer"])
    assert log[0]["details"] == {
        "path": "/v1/chat/completions",
        "idempotency_key": headers["Idempotency-Key"],
        "status_code": 200,
    }

    operator = _idempotent(operator_headers)
    made = [await client.post("/v1/admin/tenants", json={"name": "replayed"}, headers=operator) for _ in range(2)]
    assert made[1].json() == made[0].json()
    log = (await client.get("/v1/admin/audit-log?action=request.replay", headers=operator_headers)).json()["data"]
    assert [(e["details"]["path"], e["details"]["idempotency_key"]) for e in log] == [
        ("/v1/admin/tenants", operator["Idempotency-Key"])
    ]


async def test_a_refusal_is_not_stored_so_its_retry_runs_again(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    taken = await client.post("/v1/members", json={"email": "d@x.io"}, headers=tenant.headers())
    headers = _idempotent(tenant.headers())
    conflict = await client.post("/v1/members", json={"email": "d@x.io"}, headers=headers)
    assert conflict.status_code == 409
    assert await _records(client) == []
    assert (await client.delete(f"/v1/members/{taken.json()['id']}", headers=tenant.headers())).status_code == 200
    retried = await client.post("/v1/members", json={"email": "d@x.io"}, headers=headers)
    assert retried.status_code == 201
    assert "idempotent-replayed" not in retried.headers


async def test_a_402_retried_after_its_budget_is_deleted_runs(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    budget = await client.post("/v1/budgets", json={"limit_minor": 0}, headers=tenant.headers())
    assert budget.status_code == 201, budget.text
    headers = _idempotent(tenant.headers("developer"))
    refused = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert refused.status_code == 402, refused.text
    await client.delete(f"/v1/budgets/{budget.json()['id']}", headers=tenant.headers())
    retried = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert retried.status_code == 200, retried.text
    assert "idempotent-replayed" not in retried.headers


@pytest.mark.parametrize(
    ("role", "body", "status"),
    [
        ("viewer", CHAT, 403),
        ("developer", {**CHAT, "model": "no-such-model"}, 404),
        ("developer", {**CHAT, "temperature": 5}, 400),
    ],
)
async def test_no_refusal_leaves_a_record(
    client: Any, make_tenant: Any, role: str, body: dict[str, Any], status: int
) -> None:
    tenant = await make_tenant()
    refused = await client.post("/v1/chat/completions", json=body, headers=_idempotent(tenant.headers(role)))
    assert refused.status_code == status
    assert await _records(client) == []


async def test_a_replayed_completion_carries_the_headers_of_its_outcome(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = _idempotent(tenant.headers("developer"))
    first = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    again = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert again.headers["idempotent-replayed"] == "true"
    for name in ("x-switchyard-chip-us", "x-switchyard-instance-type", "content-type"):
        assert again.headers[name] == first.headers[name]
    assert int(again.headers["x-switchyard-chip-us"]) == first.json()["usage"]["compute"]["chip_us"]
    assert not any(name.startswith("x-ratelimit-") for name in again.headers)  # they described that moment
    assert again.content == first.content


async def test_stored_answers_are_sealed_so_only_the_same_key_can_open_them(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = _idempotent(tenant.headers())
    created = await client.post("/v1/api-keys", json={"role": "admin"}, headers=headers)
    value = created.json()["value"]
    [stored] = await _records(client)
    assert stored.response_sealed is not None
    assert value.encode() not in stored.response_sealed
    assert created.json()["id"].encode() not in stored.response_sealed  # the whole answer, not only the secret
    owner, other = parse_key(tenant.keys["owner"]), parse_key(tenant.keys["admin"])
    assert owner is not None
    assert other is not None
    opened = unseal(stored.response_sealed, secret=owner.secret, record_id=stored.id, status=201)
    assert json.loads(opened.body)["value"] == value
    with pytest.raises(InvalidTag):
        unseal(stored.response_sealed, secret=other.secret, record_id=stored.id, status=201)
    with pytest.raises(InvalidTag):
        unseal(stored.response_sealed, secret=owner.secret, record_id=stored.id, status=200)
    replayed = await client.post("/v1/api-keys", json={"role": "admin"}, headers=headers)
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json()["value"] == value


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
                found = select(IdempotencyRecord).where(col(IdempotencyRecord.key) == "late")
                stored_when_done.append((await session.execute(found)).scalar_one().status_code)

    await client.app(scope, receive, send)
    assert stored_when_done == [201]
