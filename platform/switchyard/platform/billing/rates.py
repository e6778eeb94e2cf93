"""Rate cards: the effective price per chip-hour of an (instance type, model, tenant tier) at a time.

Choice of card: among cards for the instance type whose ``effective_from`` is at or before the time, the
most specific wins (an exact model beats ``*``, then an exact tier beats ``*``), and among equally specific
cards the latest ``effective_from``. Cards are never edited; operators add a new version. Every instance
type the hardware catalog publishes an hourly price for has a baseline card (``*`` model and tier, effective
from 2000-01-01) at ``price_usd_per_hour / chips`` rounded half-up to 15 places, inserted on first use, so
the database stays the one place prices are read from. No applicable card raises ``NoApplicablePrice``.

A card names an instance type of the hardware catalog, or ``custom:<name>`` for hardware outside it (an
``openai-compatible`` deployment declares its ``instance`` the same way): a misspelt type would never price
anything, so it is refused (``check_instance_type``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from functools import cache

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.errors import NoApplicablePrice
from switchyard.platform.billing.money import PRICE_DECIMAL_PLACES, currency_exponent, parse_price
from switchyard.platform.billing.sql import insert_ignore
from switchyard.platform.db import new_id
from switchyard.platform.models import RateCard, utc_now
from switchyard.platform.models.rate_card import ANY

__all__ = [
    "CUSTOM_INSTANCE_PREFIX",
    "DEFAULTS_EFFECTIVE_FROM",
    "DEFAULT_CURRENCY",
    "DEFAULT_TIER",
    "check_instance_type",
    "choose_card",
    "create_rate_card",
    "default_prices",
    "ensure_default_rate_cards",
    "find_rate_card",
    "is_baseline",
    "price_chip_us",
    "tenant_tier_of",
]

DEFAULT_CURRENCY = "USD"
DEFAULT_TIER = "standard"
DEFAULTS_EFFECTIVE_FROM = datetime(2000, 1, 1, tzinfo=UTC)
"""Default cards apply from long before any usage, so every event finds one.

Catalog instance types with a published price always have this baseline card (``*`` model and tier); cards
added by operators override it from their ``effective_from`` on."""
_QUANTUM = Decimal(1).scaleb(-PRICE_DECIMAL_PLACES)
CUSTOM_INSTANCE_PREFIX = "custom:"
"""Instance types outside the hardware catalog are spelt ``custom:<name>`` (letters, digits, ``.``, ``_``, ``-``)."""
_CUSTOM_INSTANCE = re.compile(r"custom:[A-Za-z0-9][A-Za-z0-9._-]*")


@cache
def catalog_instance_types() -> frozenset[str]:
    """The instance types of the accelerator's hardware catalog."""
    from switchyard.accelerator import list_instances

    return frozenset(instance.name for instance in list_instances())


def check_instance_type(name: str) -> str:
    """``name`` if a rate card may name it (a catalog instance type or ``custom:<name>``); else ``ValueError``."""
    if name in catalog_instance_types() or _CUSTOM_INSTANCE.fullmatch(name):
        return name
    known = ", ".join(sorted(catalog_instance_types()))
    raise ValueError(
        f"unknown instance type {name!r}: name one of the hardware catalog's ({known}), or "
        f"{CUSTOM_INSTANCE_PREFIX}<name> for hardware outside it"
    )


@cache
def default_prices() -> dict[str, tuple[Decimal, str]]:
    """Instance type → (USD per chip-hour, source) from the accelerator's hardware catalog."""
    from switchyard.accelerator import list_instances

    prices: dict[str, tuple[Decimal, str]] = {}
    for instance in list_instances():
        per_chip = instance.price_per_chip_hour()
        if per_chip is None:
            continue  # no published price: such instances need an operator's rate card
        price = per_chip.quantize(_QUANTUM, rounding=ROUND_HALF_UP)
        source = f"hardware catalog: {instance.price_usd_per_hour} USD/hour / {instance.chips} chips"
        prices[instance.name] = (price, source)
    return prices


async def tenant_tier_of(session: AsyncSession, *, tenant_id: str) -> str:
    """The pricing tier of a tenant; every tenant is ``standard`` until tenants carry a tier."""
    return DEFAULT_TIER


async def create_rate_card(
    session: AsyncSession,
    *,
    instance_type: str,
    price_per_chip_hour: Decimal,
    currency: str = DEFAULT_CURRENCY,
    model: str = ANY,
    tenant_tier: str = ANY,
    effective_from: datetime | None = None,
    source: str = "",
) -> RateCard:
    """Add a rate card version (flushed, not committed)."""
    currency_exponent(currency)
    card = RateCard(
        id=new_id("rc"),
        instance_type=instance_type,
        model=model,
        tenant_tier=tenant_tier,
        currency=currency,
        price_per_chip_hour=parse_price(price_per_chip_hour),
        effective_from=(effective_from or utc_now()).astimezone(UTC),
        source=source,
    )
    session.add(card)
    await session.flush()
    return card


async def ensure_default_rate_cards(session: AsyncSession, *, instance_types: Sequence[str] | None = None) -> int:
    """Insert the catalog default card of each instance type that has no card at all; returns how many."""
    defaults = default_prices()
    wanted = [name for name in (instance_types or sorted(defaults)) if name in defaults]
    if not wanted:
        return 0
    baseline = select(col(RateCard.instance_type)).where(
        col(RateCard.instance_type).in_(wanted),
        col(RateCard.model) == ANY,
        col(RateCard.tenant_tier) == ANY,
        col(RateCard.effective_from) == DEFAULTS_EFFECTIVE_FROM,
    )
    existing = set((await session.execute(baseline)).scalars())
    rows = [
        {
            "id": new_id("rc"),
            "instance_type": name,
            "model": ANY,
            "tenant_tier": ANY,
            "currency": DEFAULT_CURRENCY,
            "price_per_chip_hour": defaults[name][0],
            "effective_from": DEFAULTS_EFFECTIVE_FROM,
            "source": defaults[name][1],
            "created_at": utc_now(),
        }
        for name in wanted
        if name not in existing
    ]
    if not rows:
        return 0
    statement = insert_ignore(session, RateCard, ["instance_type", "model", "tenant_tier", "effective_from"])
    await session.execute(statement.values(rows))
    return len(rows)


def choose_card(cards: Sequence[RateCard], *, model: str, tenant_tier: str, at: datetime) -> RateCard | None:
    """The card that applies (see the module docstring), or ``None``."""
    candidates = [
        card
        for card in cards
        if card.effective_from <= at and card.model in (model, ANY) and card.tenant_tier in (tenant_tier, ANY)
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c.model != ANY, c.tenant_tier != ANY, c.effective_from, c.id))


def is_baseline(card: RateCard) -> bool:
    """Whether ``card`` is a catalog instance type's baseline card (seeded again on first use when missing)."""
    return card.model == ANY and card.tenant_tier == ANY and card.effective_from == DEFAULTS_EFFECTIVE_FROM


async def cards_for(session: AsyncSession, *, instance_type: str) -> list[RateCard]:
    """Every card of an instance type, seeding the catalog baseline card when it is missing."""
    statement = select(RateCard).where(col(RateCard.instance_type) == instance_type)
    cards = list((await session.execute(statement)).scalars())
    if not any(map(is_baseline, cards)) and instance_type in default_prices():
        # Another transaction may have seeded it since our read: read again whether or not we inserted.
        await ensure_default_rate_cards(session, instance_types=[instance_type])
        cards = list((await session.execute(statement)).scalars())
    return cards


async def find_rate_card(
    session: AsyncSession, *, instance_type: str, model: str, tenant_tier: str, at: datetime
) -> RateCard:
    """The rate card effective for these terms at ``at``; raises ``NoApplicablePrice``."""
    card = choose_card(
        await cards_for(session, instance_type=instance_type), model=model, tenant_tier=tenant_tier, at=at
    )
    if card is None:
        raise NoApplicablePrice(
            f"no rate card for instance type {instance_type!r}, model {model!r}, tier {tenant_tier!r} "
            f"at {at.isoformat()}: add one with POST /v1/admin/rate-cards"
        )
    return card


async def price_chip_us(
    session: AsyncSession, *, instance_type: str, model: str, tenant_tier: str, at: datetime
) -> Decimal:
    """The exact price **per chip-hour** that applies to chip-microseconds of these terms used at ``at``.

    Multiply by ``chip_us / 3.6e9`` (see ``money.cost_minor``) for an amount. Raises ``NoApplicablePrice``
    when no card applies: usage is never priced at 0 by omission.
    """
    card = await find_rate_card(session, instance_type=instance_type, model=model, tenant_tier=tenant_tier, at=at)
    return card.price_per_chip_hour
