from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

__all__ = ["Readiness"]


class Readiness(BaseModel):
    """The database and the Celery broker both answered."""

    status: Literal["ready"]
    database: Literal["ok"]
    broker: Literal["ok"]
