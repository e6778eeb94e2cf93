"""tenants: suspension

An operator can suspend a tenant (``POST /v1/admin/tenants/{id}/suspend``, or the operator console) and reactivate it:
while ``tenants.suspended_at`` is set, the tenant's API keys are refused and its members cannot sign in to the
console. Every tenant made before this revision is active (NULL).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 15:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from switchyard.platform.models.base import UTCDateTime

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.add_column(sa.Column("suspended_at", UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.drop_column("suspended_at")
