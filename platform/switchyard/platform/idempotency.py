"""``Idempotency-Key`` on every POST: a successful answer is stored per API key and replayed to its retries.

The rules, after the payment APIs that introduced the header:

- **Per API key.** A record belongs to the key that sent the request (tenant or operator key); another key with
  the same ``Idempotency-Key``, even of the same tenant, makes a new request.
- **Authorization first.** The route's guards run before any record is read or claimed: a caller the route
  refuses gets that refusal, never a stored answer.
- **Only completed outcomes are stored: 2xx.** Every other answer (a 4xx refusal, a 5xx, a route failing
  mid-stream) releases the claim, so the retry runs again; a refusal changed nothing, so running it again is safe,
  and a 429 or a 402 retried after its cause is gone succeeds.
- **Sealed at rest.** The stored headers and body are encrypted under a key derived from the caller's key secret
  (``http.replay_seal``), which the server never stores: only the same key can have its answer replayed.
- **Audited.** Every replay writes ``request.replay`` (path, ``Idempotency-Key``, status) to the tenant's audit
  log, or to the operator log for operator keys.

Same key and same request → the stored status, body and outcome headers (``idempotent-replayed: true``); same key
with a different body → 422; same key while the first request is still running → 409. The answer is stored before
its last bytes go out, so a retry sent the moment the answer arrived is replayed.

**The claim lasts as long as the work.** A client that leaves mid-answer (a streamed response dropped after
``response.created``) does not end the request: the route is never told of the disconnect, so it produces its whole
answer (as it would have anyway: the response runs to the end and is billed), which is stored like any other. Its
retry meanwhile gets 409 ``idempotency_key_in_flight``, and afterwards the stored answer (the whole event stream),
never a second response billed again.

A stored answer that does not open (its sealed bytes were changed in the database) is logged and treated as
expired: the retry runs again.

While its request runs, the process renews its claim every third of ``IN_FLIGHT_LEASE`` (10 minutes), so a request
of any length (a response may run for a day) keeps it; a claim left by a crashed process is taken over
``IN_FLIGHT_LEASE`` after its last renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cryptography.exceptions import InvalidTag
from litestar.connection import ASGIConnection
from litestar.enums import ScopeType
from litestar.handlers import HTTPRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, ReceiveMessage, Scope, Send
from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from switchyard.platform.audit.service import record, record_operator
from switchyard.platform.auth.keys import parse_key
from switchyard.platform.auth.principal import Actor, Principal
from switchyard.platform.db import UNSCOPED, Database, new_id
from switchyard.platform.http.openapi import MAX_KEY_LENGTH
from switchyard.platform.http.replay_seal import StoredAnswer, seal, unseal
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.models import IdempotencyRecord, utc_now

__all__ = ["IN_FLIGHT_LEASE", "REPLAY_ACTION", "IdempotencyMiddleware"]

log = logging.getLogger(__name__)

IN_FLIGHT_LEASE = timedelta(minutes=10)
REPLAY_ACTION = "request.replay"
_OUTCOME_HEADERS = frozenset({"content-type", "location"})
"""Headers a replay repeats, besides ``x-switchyard-*``: not ``x-request-id`` (per request) nor rate-limit headers
(they describe the moment of the first request)."""


@dataclass(frozen=True, slots=True)
class _Claimed:
    record_id: str


async def _claim(
    database: Database, *, api_key_id: str, key: str, request_sha256: str, ttl: timedelta
) -> _Claimed | IdempotencyRecord:
    """Insert the in-flight claim, or return the existing record for this (API key, Idempotency-Key)."""
    now = utc_now()
    for _attempt in range(3):
        async with database.unit_of_work(UNSCOPED) as session:
            existing = (
                await session.execute(
                    select(IdempotencyRecord).where(
                        col(IdempotencyRecord.api_key_id) == api_key_id, col(IdempotencyRecord.key) == key
                    )
                )
            ).scalar_one_or_none()
            # an in-flight claim's created_at is renewed while its request runs (_keep_claimed)
            abandoned = (
                existing is not None and existing.status_code is None and existing.created_at < now - IN_FLIGHT_LEASE
            )
            if existing is not None and (existing.expires_at <= now or abandoned):
                await session.execute(delete(IdempotencyRecord).where(col(IdempotencyRecord.id) == existing.id))
                existing = None
            if existing is not None:
                return existing
        claim = IdempotencyRecord(
            id=new_id("idem"), api_key_id=api_key_id, key=key, request_sha256=request_sha256, expires_at=now + ttl
        )
        try:
            async with database.unit_of_work(UNSCOPED) as session:
                session.add(claim)
        except IntegrityError:
            continue  # another request claimed it between our read and insert: read again
        return _Claimed(claim.id)
    raise RuntimeError("could not claim idempotency key")


async def _finish(database: Database, record_id: str, status: int, sealed: bytes) -> None:
    async with database.unit_of_work(UNSCOPED) as session:
        await session.execute(
            update(IdempotencyRecord)
            .where(col(IdempotencyRecord.id) == record_id)
            .values(status_code=status, response_sealed=sealed)
        )


async def _keep_claimed(database: Database, record_id: str) -> None:
    """Renew the in-flight claim every third of ``IN_FLIGHT_LEASE`` until cancelled (its request ended)."""
    while True:
        await asyncio.sleep(IN_FLIGHT_LEASE.total_seconds() / 3)
        try:
            async with database.unit_of_work(UNSCOPED) as session:
                await session.execute(
                    update(IdempotencyRecord)
                    .where(col(IdempotencyRecord.id) == record_id, col(IdempotencyRecord.status_code).is_(None))
                    .values(created_at=utc_now())
                )
        except Exception:  # the next renewal tries again, well within the lease
            log.warning("could not renew the claim of idempotency record %s", record_id, exc_info=True)


async def _release(database: Database, record_id: str) -> None:
    async with database.unit_of_work(UNSCOPED) as session:
        await session.execute(delete(IdempotencyRecord).where(col(IdempotencyRecord.id) == record_id))


async def _audit_replay(database: Database, principal: Principal, scope: Scope, stored: IdempotencyRecord) -> None:
    """``request.replay`` in the caller's audit log (the operator log for operator keys), before the replay."""
    actor = Actor(key_id=principal.key_id, request_id=request_id_of(scope))
    details = {"path": scope["path"], "idempotency_key": stored.key, "status_code": stored.status_code}
    async with database.unit_of_work(principal.scope or UNSCOPED) as session:
        if principal.scope is None:
            record_operator(
                session,
                actor=actor,
                action=REPLAY_ACTION,
                target_type="idempotency_record",
                target_id=stored.id,
                details=details,
            )
        else:
            record(
                session,
                tenant_id=principal.scope.tenant_id,
                actor=actor,
                action=REPLAY_ACTION,
                target_type="idempotency_record",
                target_id=stored.id,
                details=details,
            )


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": False})


def _error(message: str, code: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": "Idempotency-Key", "code": code}}


def _bearer_secret(scope: Scope) -> str | None:
    """The secret of the key the authentication middleware verified (read from the request, never kept)."""
    header = next((value for name, value in scope["headers"] if name == b"authorization"), b"").decode("latin-1")
    scheme, _, token = header.partition(" ")
    parsed = parse_key(token.strip()) if scheme.lower() == "bearer" else None
    return parsed.secret if parsed is not None else None


async def _read_body(receive: Receive, limit: int | None) -> bytes | None:
    """The whole request body, or ``None`` when it exceeds ``limit`` (the route then answers 413; ``None``: no
    limit)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: what arrived is all there is
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if limit is not None and size > limit:
            return None
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _request_digest(scope: Scope, body: bytes) -> str:
    """What makes two requests the same: path, query and body (hashed in a thread past a megabyte: an upload's
    body takes tens of milliseconds, which the event loop serves others meanwhile)."""
    hasher = hashlib.sha256(b"\n".join([scope["path"].encode(), scope.get("query_string", b""), b""]))
    if len(body) > 1 << 20:
        await asyncio.to_thread(hasher.update, body)
    else:
        hasher.update(body)
    return hasher.hexdigest()


class IdempotencyMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        if scope["type"] != ScopeType.HTTP or scope["method"] != "POST":
            await next_app(scope, receive, send)
            return
        key = dict(scope["headers"]).get(b"idempotency-key", b"").decode("latin-1")
        principal: Principal | None = scope.get("user")
        secret = _bearer_secret(scope)
        if not key or principal is None or secret is None:
            await next_app(scope, receive, send)
            return
        # The route's own guards, before any record is read: a caller it refuses is refused here (and nothing is
        # claimed), never handed a stored answer.
        await scope["route_handler"].authorize_connection(ASGIConnection(scope))
        if len(key) > MAX_KEY_LENGTH:
            await _send_json(send, 400, _error("Idempotency-Key is longer than 255 characters", "invalid_value"))
            return
        settings = scope["litestar_app"].state.settings
        database: Database = scope["litestar_app"].state.database
        handler = scope["route_handler"]
        assert isinstance(handler, HTTPRouteHandler)  # an HTTP POST
        # the route's own limit (an upload's is larger than the app's max_request_body_bytes)
        body = await _read_body(receive, handler.resolve_request_max_body_size())
        if body is None:
            await _send_json(send, 413, _error("request body too large", "request_too_large"))
            return
        digest = await _request_digest(scope, body)
        ttl = timedelta(seconds=settings.idempotency_ttl_seconds)
        claim = await _claim(database, api_key_id=principal.key_id, key=key, request_sha256=digest, ttl=ttl)
        if _unreadable(claim, secret):  # damaged at rest: as if it had expired (not a 500 for its whole lifetime)
            assert isinstance(claim, IdempotencyRecord)
            await _release(database, claim.id)
            claim = await _claim(database, api_key_id=principal.key_id, key=key, request_sha256=digest, ttl=ttl)
        if isinstance(claim, _Claimed):
            await _run_and_store(scope, body, receive, send, next_app, database, claim.record_id, secret)
        elif claim.request_sha256 != digest:
            message = "Idempotency-Key was already used with a different request"
            await _send_json(send, 422, _error(message, "idempotency_key_reused"))
        elif claim.status_code is None or claim.response_sealed is None:
            message = "a request with this Idempotency-Key is still in progress"
            await _send_json(send, 409, _error(message, "idempotency_key_in_flight", "conflict_error"))
        else:
            answer = unseal(claim.response_sealed, secret=secret, record_id=claim.id, status=claim.status_code)
            await _audit_replay(database, principal, scope, claim)
            await _replay(send, claim.status_code, answer)


def _unreadable(claim: _Claimed | IdempotencyRecord, secret: str) -> bool:
    """Whether ``claim`` holds a stored answer that does not open with the caller's key (its sealed bytes were
    changed at rest: the same key always opens its own answers); logged."""
    if isinstance(claim, _Claimed) or claim.status_code is None or claim.response_sealed is None:
        return False
    try:
        unseal(claim.response_sealed, secret=secret, record_id=claim.id, status=claim.status_code)
    except (InvalidTag, ValueError):
        log.warning("the stored answer of idempotency record %s could not be opened: treated as expired", claim.id)
        return True
    return False


async def _replay(send: Send, status: int, answer: StoredAnswer) -> None:
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers]
    headers += [(b"content-length", str(len(answer.body)).encode()), (b"idempotent-replayed", b"true")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body, "more_body": False})


async def _run_and_store(
    scope: Scope,
    body: bytes,
    receive: Receive,
    send: Send,
    next_app: ASGIApp,
    database: Database,
    record_id: str,
    secret: str,
) -> None:
    """Run the request; store a 2xx answer sealed under ``secret``, release the claim for anything else."""
    replayed = False
    client_gone = False
    answered = asyncio.Event()

    async def receive_again() -> ReceiveMessage:
        nonlocal replayed, client_gone
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The body was read; from now on the only message is the client's disconnect. The route hears of it only
        # once its answer is complete: a stream is not cut short, so the answer its retry replays is stored.
        message = await receive()
        if message["type"] == "http.disconnect" and not answered.is_set():
            client_gone = True
            await answered.wait()
        return message

    status = 500
    outcome_headers: list[tuple[str, str]] = []
    parts: list[bytes] = []
    settled = False

    async def capture(message: Message) -> None:
        nonlocal status, settled
        if message["type"] == "http.response.start":
            status = message["status"]
            for raw_name, raw_value in message.get("headers", []):
                name = raw_name.decode("latin-1").lower()
                if name in _OUTCOME_HEADERS or name.startswith("x-switchyard-"):
                    outcome_headers.append((name, raw_value.decode("latin-1")))
        elif message["type"] == "http.response.body":
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                # Settle before the client has the end of the answer, so a retry it sends at once replays.
                if 200 <= status < 300:
                    answer = StoredAnswer(outcome_headers, b"".join(parts))
                    await _finish(
                        database, record_id, status, seal(answer, secret=secret, record_id=record_id, status=status)
                    )
                else:
                    await _release(database, record_id)
                settled = True
                answered.set()
        if not client_gone:
            await send(message)

    renewing = asyncio.get_running_loop().create_task(_keep_claimed(database, record_id))
    try:
        await next_app(scope, receive_again, capture)
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        if not settled:  # the answer never completed (the route failed, the server stopped): a retry runs again
            await _release(database, record_id)
