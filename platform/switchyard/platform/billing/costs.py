"""What usage costs as it will be invoiced: a rated event at the price it was rated at, an event not rated yet at
the card that applies now (the price rating will most likely give it). Budgets (``spend``) and usage reports
(``usage``, with ``priced=True``) count money this one way.

Each (price, instance type, model) group is rounded up once to the micro-unit, so a figure can differ from the sum
of per-request settlements by less than one micro-unit per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.billing.money import cost_micros_ceil
from switchyard.platform.billing.rates import cards_for, choose_card, tenant_tier_of

__all__ = ["Price", "Pricer"]


@dataclass(frozen=True, slots=True)
class Price:
    per_chip_hour: Decimal
    currency: str

    def of(self, chip_us: int) -> int:
        """The cost of ``chip_us`` in micro-units of the currency, rounded up."""
        return cost_micros_ceil(chip_us, self.per_chip_hour)


class Pricer:
    """Prices of one tenant's usage, reading each instance type's cards once."""

    def __init__(self, session: AsyncSession, *, tenant_id: str, now: datetime) -> None:
        self._session = session
        self._tenant_id = tenant_id
        self._now = now
        self._tier: str | None = None
        self._current: dict[tuple[str, str], Price | None] = {}

    async def price(
        self, *, instance_type: str, model: str, rated_at: Decimal | None, rated_in: str | None
    ) -> Price | None:
        """The price of a group of events: the one they were rated at, else the card that applies now (``None``
        when no card applies: such usage costs nothing yet)."""
        if rated_at is not None and rated_in is not None:
            return Price(rated_at, rated_in)
        key = (instance_type, model)
        if key not in self._current:
            if self._tier is None:
                self._tier = await tenant_tier_of(self._session, tenant_id=self._tenant_id)
            cards = await cards_for(self._session, instance_type=instance_type)
            card = choose_card(cards, model=model, tenant_tier=self._tier, at=self._now)
            self._current[key] = Price(card.price_per_chip_hour, card.currency) if card is not None else None
        return self._current[key]
