from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switchyard.accelerator.sim.attribution import attribute_chip_us

works = st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=50)
float_works = st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), min_size=1, max_size=50)


@given(total=st.integers(min_value=0, max_value=10**15), work=works)
def test_parts_sum_exactly_and_stay_within_one_of_the_exact_share(total: int, work: list[int]) -> None:
    parts = attribute_chip_us(total, work)
    assert sum(parts) == total
    assert len(parts) == len(work)
    w = sum(work) or len(work)
    shares = work if sum(work) else [1] * len(work)
    for part, share in zip(parts, shares, strict=True):
        assert abs(part * w - total * share) < w  # within one unit of the exact share


@given(total=st.integers(min_value=0, max_value=10**12), work=float_works)
def test_float_work_sums_exactly_and_is_deterministic(total: int, work: list[float]) -> None:
    parts = attribute_chip_us(total, work)
    assert sum(parts) == total
    assert all(p >= 0 for p in parts)
    assert parts == attribute_chip_us(total, list(work))


@given(total=st.integers(min_value=0, max_value=10**9), work=works)
def test_proportional_ordering(total: int, work: list[int]) -> None:
    parts = attribute_chip_us(total, work)
    for i in range(len(work)):
        for j in range(len(work)):
            if work[i] > work[j]:
                assert parts[i] >= parts[j]


def test_ties_go_to_earlier_requests() -> None:
    assert attribute_chip_us(10, [1, 1, 1]) == [4, 3, 3]
    assert attribute_chip_us(5, [0, 0]) == [3, 2]
    assert attribute_chip_us(0, []) == []


@pytest.mark.parametrize(("total", "work"), [(-1, [1]), (1, []), (1, [-1]), (1, [float("inf")])])
def test_bad_input_is_refused(total: int, work: list[float]) -> None:
    with pytest.raises(ValueError, match=r"must|cannot"):
        attribute_chip_us(total, work)
