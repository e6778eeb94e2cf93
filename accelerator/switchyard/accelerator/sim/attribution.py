"""Exact integer attribution of chip-microseconds to the requests that shared an iteration."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

__all__ = ["attribute_chip_us", "attribute_chunks_and_decodes"]


def attribute_chip_us(total_chip_us: int, work: Sequence[int | float]) -> list[int]:
    """Split `total_chip_us` in proportion to `work`; the parts sum exactly to the total.

    Each part gets the floor of its exact share; the leftover units go one each to the largest
    remainders, ties broken by position (earlier first), so the result is deterministic.
    Zero total work splits evenly. Shares are computed exactly (integers, or floats as fractions).
    """
    if isinstance(total_chip_us, bool) or not isinstance(total_chip_us, int) or total_chip_us < 0:
        raise ValueError(f"total_chip_us must be a non-negative int, got {total_chip_us!r}")
    n = len(work)
    if n == 0:
        if total_chip_us:
            raise ValueError("cannot attribute chip time to no requests")
        return []
    for w in work:
        if w < 0 or (isinstance(w, float) and not math.isfinite(w)):
            raise ValueError(f"work must be finite and non-negative, got {w!r}")
    first = work[0]
    if isinstance(first, int) and first > 0 and all(w == first and isinstance(w, int) for w in work):
        # Equal shares (a decode step): the largest-remainder rule gives the leftover to the first ones.
        q, r = divmod(total_chip_us, n)
        return [q + 1] * r + [q] * (n - r)
    if all(isinstance(w, int) for w in work):
        weights: list[int] = [int(w) for w in work]
    else:
        fracs = [Fraction(w) for w in work]
        denominator = math.lcm(*(f.denominator for f in fracs))
        weights = [int(f * denominator) for f in fracs]
    total_work = sum(weights)
    if total_work == 0:
        weights, total_work = [1] * n, n
    parts = []
    remainders = []
    for i, w in enumerate(weights):
        q, r = divmod(total_chip_us * w, total_work)
        parts.append(q)
        remainders.append((-r, i))
    leftover = total_chip_us - sum(parts)
    for _, i in sorted(remainders)[:leftover]:
        parts[i] += 1
    return parts


def attribute_chunks_and_decodes(
    total_chip_us: int, chunk_tokens: Sequence[int], decodes: int
) -> tuple[list[int], int, int]:
    """`attribute_chip_us(total_chip_us, [*chunk_tokens, *[1] * decodes])` in time linear in the chunks only.

    An iteration that carries prompt chunks and `decodes` one-token decodes: every decode has the same exact share,
    so they share one floor and one remainder, and the leftover units that go to decodes go to the first ones.
    Returns (each chunk's part, each decode's part, how many of the first decodes get one unit more).
    """
    work = sum(chunk_tokens) + decodes
    if work <= 0:
        return attribute_chip_us(total_chip_us, [0] * len(chunk_tokens)), 0, 0
    parts = [total_chip_us * n // work for n in chunk_tokens]
    one, one_rem = divmod(total_chip_us, work)
    leftover = total_chip_us - sum(parts) - one * decodes
    extra = 0
    if leftover:
        chunks = len(chunk_tokens)
        order = [(-(total_chip_us * n % work), i) for i, n in enumerate(chunk_tokens)]
        order += [(-one_rem, chunks + i) for i in range(min(leftover, decodes))]
        order.sort()
        for _, i in order[:leftover]:
            if i < chunks:
                parts[i] += 1
            else:
                extra += 1
    return parts, one, extra
