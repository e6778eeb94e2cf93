"""Billing by compute used: money, rate cards, the usage ledger, budgets, invoices and reconciliation.

The names below are what other parts of the platform call (see ``docs/billing.md``).
"""

from __future__ import annotations

from switchyard.platform.billing.budgets import Reservation, expire_reservations, release, reserve, settle
from switchyard.platform.billing.errors import BudgetExceeded, NoApplicablePrice, ReservationNotFound
from switchyard.platform.billing.fleet import record_fleet_busy
from switchyard.platform.billing.ledger import UsageEventCreate, rate_events, record_usage, record_usage_bulk
from switchyard.platform.billing.money import Money, cost_minor
from switchyard.platform.billing.rates import price_chip_us

__all__ = [
    "BudgetExceeded",
    "Money",
    "NoApplicablePrice",
    "Reservation",
    "ReservationNotFound",
    "UsageEventCreate",
    "cost_minor",
    "expire_reservations",
    "price_chip_us",
    "rate_events",
    "record_fleet_busy",
    "record_usage",
    "record_usage_bulk",
    "release",
    "reserve",
    "settle",
]
