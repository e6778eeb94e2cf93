"""Exact integer attribution of chip-microseconds to the requests that shared an iteration."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

__all__ = ["attribute_chip_us"]


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
