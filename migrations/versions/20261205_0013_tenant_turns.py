"""fair workers: ``tenant_turns``, when a worker last took each tenant's background job

One row per tenant, tenant-owned with the row-level security policy of every tenant-owned table on PostgreSQL
(migration 0005). Workers take the next job of the tenant served least recently.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05 16:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

import switchyard.platform.models.base

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT = "tenant_id = current_setting('switchyard.tenant_id', true)"


def upgrade() -> None:
    op.create_table(
        "tenant_turns",
        sa.Column("tenant_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("served_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"]),
        sa.PrimaryKeyConstraint("tenant_id"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE tenant_turns ENABLE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY tenant_isolation ON tenant_turns USING ({TENANT}) WITH CHECK ({TENANT})")


def downgrade() -> None:
    op.drop_table("tenant_turns")
