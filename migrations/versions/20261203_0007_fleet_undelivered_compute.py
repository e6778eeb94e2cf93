"""fleet busy: compute whose receipt never reached a gateway

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("fleet_busy", schema=None) as batch_op:
        batch_op.add_column(sa.Column("undelivered_chip_us", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("fleet_busy", schema=None) as batch_op:
        batch_op.drop_column("undelivered_chip_us")
