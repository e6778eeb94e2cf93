"""``Idempotency-Key`` on every POST: the first response is stored per tenant and replayed to retries.

Same key and same request → the stored status and body (``idempotent-replayed: true``); same key with a
different body → 422; same key while the first request is still running → 409. The response is stored before
its last bytes go out, so a retry sent the moment the answer arrived is replayed; server errors (5xx) and answers
that never completed (a client gone mid-stream) are not stored, so a retry runs again. A claim left by a crashed
process is taken over after ``IN_FLIGHT_LEASE``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, ReceiveMessage, Scope, Send
from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from switchyard.platform.db import UNSCOPED, Database, new_id
from switchyard.platform.models import IdempotencyRecord, utc_now

__all__ = ["IdempotencyMiddleware"]

IN_FLIGHT_LEASE = timedelta(minutes=10)
MAX_KEY_LENGTH = 255


@dataclass(frozen=True, slots=True)
class _Claimed:
    record_id: str


async def _claim(
    database: Database, *, owner: str, key: str, request_sha256: str, ttl: timedelta
) -> _Claimed | IdempotencyRecord:
    """Insert the in-flight claim, or return the existing record for this (owner, key)."""
    now = utc_now()
    for _attempt in range(3):
        async with database.unit_of_work(UNSCOPED) as session:
            existing = (
                await session.execute(
                    select(IdempotencyRecord).where(
                        col(IdempotencyRecord.owner) == owner, col(IdempotencyRecord.key) == key
                    )
                )
            ).scalar_one_or_none()
            abandoned = (
                existing is not None and existing.status_code is None and existing.created_at < now - IN_FLIGHT_LEASE
            )
            if existing is not None and (existing.expires_at <= now or abandoned):
                await session.execute(delete(IdempotencyRecord).where(col(IdempotencyRecord.id) == existing.id))
                existing = None
            if existing is not None:
                return existing
        record = IdempotencyRecord(
            id=new_id("idem"), owner=owner, key=key, request_sha256=request_sha256, expires_at=now + ttl
        )
        try:
            async with database.unit_of_work(UNSCOPED) as session:
                session.add(record)
        except IntegrityError:
            continue  # another request claimed it between our read and insert: read again
        return _Claimed(record.id)
    raise RuntimeError("could not claim idempotency key")


async def _finish(database: Database, record_id: str, status: int, content_type: str | None, body: bytes) -> None:
    async with database.unit_of_work(UNSCOPED) as session:
        await session.execute(
            update(IdempotencyRecord)
            .where(col(IdempotencyRecord.id) == record_id)
            .values(status_code=status, content_type=content_type, response_body=body)
        )


async def _release(database: Database, record_id: str) -> None:
    async with database.unit_of_work(UNSCOPED) as session:
        await session.execute(delete(IdempotencyRecord).where(col(IdempotencyRecord.id) == record_id))


async def _send_json(send: Send, status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": False})


def _error(message: str, code: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": "Idempotency-Key", "code": code}}


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or ``None`` when it exceeds ``limit`` (the route then answers 413)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: what arrived is all there is
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            return None
        if not message.get("more_body", False):
            return b"".join(chunks)


class IdempotencyMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        headers = dict(scope["headers"])
        key = headers.get(b"idempotency-key", b"").decode("latin-1")
        principal = scope.get("user")
        if scope["type"] != ScopeType.HTTP or scope["method"] != "POST" or not key or principal is None:
            await next_app(scope, receive, send)
            return
        if len(key) > MAX_KEY_LENGTH:
            await _send_json(send, 400, _error("Idempotency-Key is longer than 255 characters", "invalid_value"), [])
            return
        settings = scope["litestar_app"].state.settings
        database: Database = scope["litestar_app"].state.database
        body = await _read_body(receive, settings.max_request_body_bytes)
        if body is None:
            await _send_json(send, 413, _error("request body too large", "request_too_large"), [])
            return
        digest = hashlib.sha256(b"\n".join([scope["path"].encode(), scope.get("query_string", b""), body])).hexdigest()
        claim = await _claim(
            database,
            owner=principal.owner,
            key=key,
            request_sha256=digest,
            ttl=timedelta(seconds=settings.idempotency_ttl_seconds),
        )
        if isinstance(claim, IdempotencyRecord):
            await self._answer_existing(claim, digest, send)
            return
        await self._run_and_store(scope, body, receive, send, next_app, database, claim.record_id)

    @staticmethod
    async def _answer_existing(record: IdempotencyRecord, digest: str, send: Send) -> None:
        if record.request_sha256 != digest:
            message = "Idempotency-Key was already used with a different request"
            await _send_json(send, 422, _error(message, "idempotency_key_reused"), [])
        elif record.status_code is None:
            message = "a request with this Idempotency-Key is still in progress"
            await _send_json(send, 409, _error(message, "idempotency_key_in_flight", "conflict_error"), [])
        else:
            payload = record.response_body or b""
            response_headers = [
                (b"content-type", (record.content_type or "application/json").encode()),
                (b"content-length", str(len(payload)).encode()),
                (b"idempotent-replayed", b"true"),
            ]
            await send({"type": "http.response.start", "status": record.status_code, "headers": response_headers})
            await send({"type": "http.response.body", "body": payload, "more_body": False})

    @staticmethod
    async def _run_and_store(
        scope: Scope, body: bytes, receive: Receive, send: Send, next_app: ASGIApp, database: Database, record_id: str
    ) -> None:
        replayed = False

        async def receive_again() -> ReceiveMessage:
            nonlocal replayed
            if replayed:  # the body was read; from now on the only message is the client's disconnect
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        status = 500
        content_type: str | None = None
        parts: list[bytes] = []
        settled = False

        async def capture(message: Message) -> None:
            nonlocal status, content_type, settled
            if message["type"] == "http.response.start":
                status = message["status"]
                content_type = dict(message.get("headers", [])).get(b"content-type", b"").decode() or None
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    # Settle before the client has the end of the answer, so a retry it sends at once replays.
                    if status < 500:
                        await _finish(database, record_id, status, content_type, b"".join(parts))
                    else:
                        await _release(database, record_id)
                    settled = True
            await send(message)

        try:
            await next_app(scope, receive_again, capture)
        finally:
            if not settled:  # the answer never completed (an error, a client gone mid-stream): a retry runs again
                await _release(database, record_id)
