"""The operator's console under ``/console/operator``: tenants, credits, rate cards and the live fleet.

Operators sign in with an operator console account (``switchyard operator login create``), not with a member's
account: their sessions live in their own table and cookie, outside any tenant.
"""

from __future__ import annotations

from switchyard.platform.console.operator.router import operator_router

__all__ = ["operator_router"]
