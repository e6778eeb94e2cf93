"""Billing errors: what callers of the ledger, pricing and budgets can get back."""

from __future__ import annotations

from switchyard.platform.http.errors import ApiError

__all__ = ["BudgetExceeded", "NoApplicablePrice", "ReservationNotFound"]


class BudgetExceeded(ApiError):
    """402: a hard budget would be exceeded by the request's estimated maximum cost (refused before any work)."""

    status_code = 402
    error_type = "insufficient_quota"
    default_code = "budget_exceeded"
    code: str  # never None here: the default code is always set

    def __init__(self, message: str, *, budget_id: str, remaining_micros: int) -> None:
        super().__init__(message, param=None)
        self.budget_id = budget_id
        self.remaining_micros = remaining_micros


class NoApplicablePrice(LookupError):
    """No rate card applies to an (instance type, model, tier, time): an operator must add one; never priced 0."""


class ReservationNotFound(LookupError):
    """No reservation with that id in the caller's tenant."""
