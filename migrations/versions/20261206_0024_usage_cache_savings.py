"""usage: the chip-time a request's cached prompt tokens saved

Every usage event records what computing its cached prompt tokens would have cost beyond reading them
(``usage_events.cache_saved_chip_us``: the simulated fleet's estimate; 0 where nothing was cached or an upstream does
not say), and the hourly and daily roll-ups sum it (``usage_aggregates.cache_saved_chip_us``), so ``/v1/usage``,
invoices and the console show it beside ``input_cached_tokens``. It is never billed. Usage recorded before this
revision has 0.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06 16:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("usage_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cache_saved_chip_us", sa.BigInteger(), nullable=False, server_default="0"))
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cache_saved_chip_us", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.drop_column("cache_saved_chip_us")
    with op.batch_alter_table("usage_events", schema=None) as batch_op:
        batch_op.drop_column("cache_saved_chip_us")
