"""Money: integer minor units, half-up rounding once per line, checked against a reference Decimal computation."""

from __future__ import annotations

import ast
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import switchyard.platform.billing as billing_package
from switchyard.platform.billing.money import (
    CURRENCY_EXPONENTS,
    Money,
    chip_hours,
    cost_micros_ceil,
    cost_minor,
    format_minor,
    parse_price,
    round_half_up,
)

prices = st.decimals(min_value=0, max_value=10_000, places=15, allow_nan=False, allow_infinity=False)
chip_us = st.integers(min_value=0, max_value=10**15)
currencies = st.sampled_from(["USD", "JPY", "KWD"])  # 2, 0 and 3 decimals


def reference_cost(items: list[tuple[int, Decimal]], currency: str) -> int:
    with localcontext() as context:
        context.prec = 200  # exact for these magnitudes
        total = sum((Decimal(c) * p for c, p in items), Decimal(0)) / Decimal(3_600_000_000)
        minor = total.scaleb(CURRENCY_EXPONENTS[currency])
        return int(minor.quantize(Decimal(1), rounding=ROUND_HALF_UP))


@given(st.lists(st.tuples(chip_us, prices), max_size=20), currencies)
def test_line_amount_matches_reference_decimal(items: list[tuple[int, Decimal]], currency: str) -> None:
    assert cost_minor(items, currency) == reference_cost(items, currency)


@given(st.lists(st.tuples(chip_us, prices), min_size=2, max_size=10))
def test_rounding_happens_once_per_line(items: list[tuple[int, Decimal]]) -> None:
    line = cost_minor(items, "USD")
    per_event = sum(cost_minor([item], "USD") for item in items)
    assert abs(line - per_event) <= len(items) // 2 + 1  # per-event rounding drifts; the line does not
    assert line == reference_cost(items, "USD")


@given(st.integers(-(10**30), 10**30), st.integers(1, 10**20))
def test_round_half_up_is_symmetric_and_nearest(numerator: int, denominator: int) -> None:
    with localcontext() as context:
        context.prec = 100
        expected = (Decimal(numerator) / Decimal(denominator)).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    assert round_half_up(numerator, denominator) == int(expected)
    assert round_half_up(-numerator, denominator) == -round_half_up(numerator, denominator)


@given(chip_us, prices)
def test_budget_micros_round_up(chip: int, price: Decimal) -> None:
    with localcontext() as context:
        context.prec = 200
        exact = Decimal(chip) * price * 1_000_000 / Decimal(3_600_000_000)
        assert cost_micros_ceil(chip, price) == int(exact.to_integral_value(rounding=ROUND_CEILING))


def test_halves_round_up_in_each_currency() -> None:
    # 1.8e9 chip-µs is half a chip-hour: at 0.01 a chip-hour that is half a cent.
    assert cost_minor([(1_800_000_000, Decimal("0.01"))], "USD") == 1
    assert cost_minor([(1_800_000_000, Decimal("1"))], "JPY") == 1  # 0.5 yen
    assert cost_minor([(1_800_000_000, Decimal("0.001"))], "KWD") == 1  # 0.5 fils
    assert cost_minor([(1_799_999_999, Decimal("0.01"))], "USD") == 0


def test_formatting_and_money() -> None:
    assert (format_minor(1234, "USD"), format_minor(1234, "JPY"), format_minor(1234, "KWD")) == (
        "12.34",
        "1234",
        "1.234",
    )
    assert str(Money(5, "USD") + Money(7, "USD")) == "0.12 USD"
    assert chip_hours(1_800_000_000) == Decimal("0.500000000")
    with pytest.raises(ValueError, match="cannot add"):
        Money(1, "USD") + Money(1, "EUR")
    with pytest.raises(TypeError):
        Money(1.5, "USD")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="15 decimal places"):
        parse_price("0.0000000000000001")
    with pytest.raises(ValueError, match="non-negative"):
        parse_price("-1")


def _is_float(node: ast.AST) -> bool:
    literal = isinstance(node, ast.Constant) and isinstance(node.value, float)
    return literal or (isinstance(node, ast.Name) and node.id == "float")


def _is_true_division(node: ast.AST) -> bool:
    """``a / b`` yields a float for ints; money code uses ``//`` or divides a ``Decimal(...)``."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
        return False
    return not (isinstance(node.left, ast.Call) and getattr(node.left.func, "id", "") == "Decimal")


def _float_uses(tree: ast.AST) -> list[int]:
    return [getattr(node, "lineno", 0) for node in ast.walk(tree) if _is_float(node) or _is_true_division(node)]


def test_no_float_in_the_billing_package() -> None:
    root = Path(billing_package.__file__).parent
    offenders = {}
    for path in sorted(root.rglob("*.py")):
        lines = _float_uses(ast.parse(path.read_text(), filename=str(path)))
        if lines:
            offenders[path.name] = lines
    assert offenders == {}, "no float (literals, float(), or int / int) in billing: use Decimal or minor units"


def test_the_float_scan_can_fail() -> None:
    assert _float_uses(ast.parse("x = 0.1"))
    assert _float_uses(ast.parse("y = float(z)"))
    assert _float_uses(ast.parse("a = b / c"))
    assert not _float_uses(ast.parse("a = Decimal(b) / c"))


def test_public_names_of_the_billing_package() -> None:
    import switchyard.platform.billing as billing

    assert billing.__all__ == sorted(billing.__all__)
    for name in billing.__all__:
        assert hasattr(billing, name), name
    assert {"record_usage", "reserve", "settle", "release", "price_chip_us", "record_fleet_busy"} <= set(
        billing.__all__
    )
