"""Random, time-ordered, prefixed identifiers (``ten_01J...``): 48-bit milliseconds + 80 random bits."""

from __future__ import annotations

import secrets
import time

__all__ = ["new_id"]

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def new_id(prefix: str) -> str:
    """A new id like ``key_01jd8v...``; ids sort by creation time, then randomly within a millisecond."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return f"{prefix}_{''.join(reversed(chars))}"
