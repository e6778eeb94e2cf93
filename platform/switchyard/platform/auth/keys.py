"""API key format ``sy_<short id>_<secret>``: the short id finds the row, the secret's SHA-256 proves it."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

__all__ = ["IssuedKey", "ParsedKey", "hash_secret", "issue_key", "parse_key", "secret_matches"]

KEY_PREFIX = "sy"
SECRET_BYTES = 32  # 256 bits of secret


@dataclass(frozen=True, slots=True)
class ParsedKey:
    short_id: str
    secret: str


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A freshly made key: ``plaintext`` is shown once and never stored."""

    short_id: str
    plaintext: str
    secret_sha256: str


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_key(kind: str = "") -> IssuedKey:
    """A new key; ``kind`` ("op" for operators) is folded into the short id so keys say what they are."""
    short_id = kind + secrets.token_hex(6)
    secret = secrets.token_urlsafe(SECRET_BYTES)
    return IssuedKey(short_id, f"{KEY_PREFIX}_{short_id}_{secret}", hash_secret(secret))


def parse_key(plaintext: str) -> ParsedKey | None:
    """Split a presented key; ``None`` when it is not shaped like one of ours."""
    prefix, sep, rest = plaintext.partition("_")
    short_id, sep2, secret = rest.partition("_")
    if prefix != KEY_PREFIX or not sep or not sep2 or not short_id.isalnum() or len(short_id) > 32:
        return None
    if len(secret) < 22:  # fewer than 128 bits
        return None
    return ParsedKey(short_id, secret)


def secret_matches(secret: str, secret_sha256: str) -> bool:
    """Constant-time comparison of a presented secret with the stored hash."""
    return hmac.compare_digest(hash_secret(secret), secret_sha256)
