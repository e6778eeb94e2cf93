"""fleet receipts: every request's compute as the process that ran it issued it

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

import switchyard.platform.models.base

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fleet_receipts",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("tenant_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("request_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("replica", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("instance_type", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("chip_us", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("fleet_receipts", schema=None) as batch_op:
        batch_op.create_index("ix_fleet_receipts_request", ["tenant_id", "request_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_fleet_receipts_finished_at"), ["finished_at"], unique=False)


def downgrade() -> None:
    op.drop_table("fleet_receipts")
