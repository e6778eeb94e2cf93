"""Stored answers to ``Idempotency-Key`` retries, sealed so that only the API key that asked can open them.

An answer may hold a secret (the ``value`` of a key just created), while the database keeps only the SHA-256 of
API key secrets. So every stored answer is encrypted with AES-256-GCM under a key derived from the caller's own
key secret: ``HMAC-SHA256(key=secret, msg="switchyard-idempotency\\0" + record id)``. Nothing the server keeps
(the database, a dump of it, the logs) can derive that key; the same API key, presenting its secret again, does,
and gets its replay. The record id and status code are authenticated with the answer, so a sealed answer moved to
another record or given another status does not open.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["StoredAnswer", "seal", "unseal"]

_CONTEXT = b"switchyard-idempotency\0"
_NONCE_BYTES = 12


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """The part of a response that a replay repeats: the headers describing the outcome, and the body."""

    headers: list[tuple[str, str]]
    body: bytes


def _cipher(secret: str, record_id: str) -> AESGCM:
    return AESGCM(hmac.new(secret.encode(), _CONTEXT + record_id.encode(), hashlib.sha256).digest())


def _associated_data(record_id: str, status: int) -> bytes:
    return f"{record_id}\0{status}".encode()


def seal(answer: StoredAnswer, *, secret: str, record_id: str, status: int) -> bytes:
    """``nonce + ciphertext`` of ``answer``, openable only with the same ``secret``, record and status."""
    nonce = os.urandom(_NONCE_BYTES)
    plaintext = json.dumps(answer.headers).encode() + b"\n" + answer.body  # JSON never holds a raw newline
    return nonce + _cipher(secret, record_id).encrypt(nonce, plaintext, _associated_data(record_id, status))


def unseal(sealed: bytes, *, secret: str, record_id: str, status: int) -> StoredAnswer:
    """The answer ``seal`` stored; raises ``cryptography.exceptions.InvalidTag`` for any other secret or record."""
    nonce, ciphertext = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
    plaintext = _cipher(secret, record_id).decrypt(nonce, ciphertext, _associated_data(record_id, status))
    headers, _, body = plaintext.partition(b"\n")
    return StoredAnswer([(name, value) for name, value in json.loads(headers)], body)
