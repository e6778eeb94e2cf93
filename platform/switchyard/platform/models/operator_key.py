from __future__ import annotations

from switchyard.platform.models.api_key import KeyColumns

__all__ = ["OperatorKey"]


class OperatorKey(KeyColumns, table=True):
    """A platform operator's key: manages tenants, sees no tenant's data through tenant routes."""

    __tablename__ = "operator_keys"
