"""A column type for exact decimals (prices): stored as canonical text, so SQLite keeps every digit."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import String
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = ["DecimalText"]


class DecimalText(TypeDecorator[Decimal]):
    """A ``Decimal`` stored as its exact text (SQLite's NUMERIC would round through a binary float)."""

    impl = String(48)
    cache_ok = True

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        if not isinstance(value, Decimal) or not value.is_finite():
            raise ValueError(f"DecimalText stores finite Decimal values only, not {value!r}")
        return format(value, "f")

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        return None if value is None else Decimal(value)
