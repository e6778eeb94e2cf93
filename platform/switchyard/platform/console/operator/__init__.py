"""The operator's console under ``/console/operator``: tenants (create, members' password resets,
credits), rate cards, the live fleet and the operator audit log.

Operators sign in with an operator console account (``switchyard operator login create``), not with a member's
account: their sessions live in their own table and cookie, outside any tenant.
"""

from __future__ import annotations

from switchyard.platform.console.operator.router import operator_router

__all__ = ["operator_router"]
