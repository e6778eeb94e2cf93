"""Money without floats: integer minor units, exact ``Decimal`` prices, half-up rounding done once per line.

A price is a ``Decimal`` per chip-hour with at most ``PRICE_DECIMAL_PLACES`` places; a quantity of compute
is an integer number of chip-microseconds. The cost of a set of (chip-µs, price) pairs is the exact rational
``Σ chip_us * price / 3.6e9`` and is computed with integers only; it is rounded exactly once, half-up
(away from zero for credits), into the currency's minor units.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

__all__ = [
    "CHIP_US_PER_CHIP_HOUR",
    "CURRENCY_EXPONENTS",
    "MICROS_PER_UNIT",
    "PRICE_DECIMAL_PLACES",
    "Money",
    "UnknownCurrency",
    "chip_hours",
    "cost_micros_ceil",
    "cost_minor",
    "currency_exponent",
    "format_minor",
    "parse_price",
    "round_half_up",
]

CHIP_US_PER_CHIP_HOUR = 3_600_000_000
PRICE_DECIMAL_PLACES = 15
"""Prices per chip-hour keep up to 15 decimal places (the issue asks for at least 12)."""
MICROS_PER_UNIT = 1_000_000
"""Budgets count in micro-units of the major unit (10^-6 USD), fine enough for sub-cent requests."""

CURRENCY_EXPONENTS: dict[str, int] = {
    "USD": 2,
    "EUR": 2,
    "GBP": 2,
    "CHF": 2,
    "CAD": 2,
    "AUD": 2,
    "INR": 2,
    "JPY": 0,
    "KRW": 0,
    "CLP": 0,
    "KWD": 3,
    "BHD": 3,
    "OMR": 3,
    "JOD": 3,
    "TND": 3,
}
"""ISO 4217 minor-unit exponents of the currencies prices may be set in."""

_PRICE_SCALE = 10**PRICE_DECIMAL_PLACES


class UnknownCurrency(ValueError):
    """A currency code that is not in ``CURRENCY_EXPONENTS``."""


def currency_exponent(currency: str) -> int:
    """Decimal places of the currency's minor unit (USD 2, JPY 0, KWD 3)."""
    try:
        return CURRENCY_EXPONENTS[currency]
    except KeyError:
        raise UnknownCurrency(f"unsupported currency {currency!r}") from None


def round_half_up(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded to the nearest integer, halves away from zero."""
    if denominator <= 0:
        raise ValueError("denominator must be positive")
    magnitude = (2 * abs(numerator) + denominator) // (2 * denominator)
    return magnitude if numerator >= 0 else -magnitude


def _ceil_div(numerator: int, denominator: int) -> int:
    return -((-numerator) // denominator)


def parse_price(value: Decimal | str) -> Decimal:
    """A price as an exact ``Decimal``: finite, non-negative, at most ``PRICE_DECIMAL_PLACES`` places."""
    price = value if isinstance(value, Decimal) else Decimal(value)
    if not price.is_finite() or price < 0:
        raise ValueError(f"a price must be a finite, non-negative decimal, not {value!r}")
    exponent = price.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -PRICE_DECIMAL_PLACES:
        raise ValueError(f"a price has at most {PRICE_DECIMAL_PLACES} decimal places")
    return price


def _scaled_price(price: Decimal) -> int:
    """The price in units of 10^-15, exactly (``parse_price`` guarantees it is an integer there)."""
    scaled = parse_price(price).scaleb(PRICE_DECIMAL_PLACES)
    if scaled != scaled.to_integral_value():
        raise ValueError("price has too many decimal places")
    return int(scaled)


def _cost_numerator(items: Iterable[tuple[int, Decimal]]) -> int:
    """``Σ chip_us * price * 10^15`` as an exact integer."""
    return sum(chip_us * _scaled_price(price) for chip_us, price in items)


def cost_minor(items: Iterable[tuple[int, Decimal]], currency: str) -> int:
    """The amount of (chip-µs, price per chip-hour) pairs in minor units, rounded once, half-up."""
    scale = 10 ** currency_exponent(currency)
    return round_half_up(_cost_numerator(items) * scale, CHIP_US_PER_CHIP_HOUR * _PRICE_SCALE)


def cost_micros_ceil(chip_us: int, price: Decimal) -> int:
    """The cost of ``chip_us`` at ``price`` in micro-units, rounded up (budgets never under-count)."""
    return _ceil_div(_cost_numerator([(chip_us, price)]) * MICROS_PER_UNIT, CHIP_US_PER_CHIP_HOUR * _PRICE_SCALE)


def chip_hours(chip_us: int, places: int = 9) -> Decimal:
    """``chip_us`` in chip-hours, rounded half-up to ``places`` decimals (display only; amounts use chip-µs)."""
    scale = 10**places
    return Decimal(round_half_up(chip_us * scale, CHIP_US_PER_CHIP_HOUR)).scaleb(-places)


def format_minor(amount_minor: int, currency: str) -> str:
    """Minor units as a decimal string in the major unit: ``format_minor(1234, "USD") == "12.34"``."""
    return str(Decimal(amount_minor).scaleb(-currency_exponent(currency)))


@dataclass(frozen=True, slots=True)
class Money:
    """An amount in integer minor units of one currency."""

    minor: int
    currency: str

    def __post_init__(self) -> None:
        currency_exponent(self.currency)
        if not isinstance(self.minor, int) or isinstance(self.minor, bool):
            raise TypeError("Money holds an integer number of minor units")

    def __add__(self, other: Money) -> Money:
        if other.currency != self.currency:
            raise ValueError(f"cannot add {other.currency} to {self.currency}")
        return Money(self.minor + other.minor, self.currency)

    def __str__(self) -> str:
        return f"{format_minor(self.minor, self.currency)} {self.currency}"
