"""member password resets: one-time links that replace a member's forgotten password

``member_password_resets`` holds a member's live reset link (the secret only as SHA-256), issued by an admin or
owner on the Members page or asked for by mail on the sign-in page; tenant-owned with the row-level security
policy of every tenant-owned table on PostgreSQL (migration 0005).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

import switchyard.platform.models.base

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT = "tenant_id = current_setting('switchyard.tenant_id', true)"


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def _utc() -> switchyard.platform.models.base.UTCDateTime:
    return switchyard.platform.models.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "member_password_resets",
        sa.Column("tenant_id", _text(40), nullable=False),
        sa.Column("id", _text(40), nullable=False),
        sa.Column("token_sha256", _text(64), nullable=False),
        sa.Column("member_id", _text(40), nullable=False),
        sa.Column("issued_by", _text(40), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("expires_at", _utc(), nullable=False),
        sa.Column("used_at", _utc(), nullable=True),
        sa.ForeignKeyConstraint(["member_id"], ["members.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_sha256"),
    )
    with op.batch_alter_table("member_password_resets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_member_password_resets_member_id"), ["member_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_member_password_resets_tenant_id"), ["tenant_id"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE member_password_resets ENABLE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY tenant_isolation ON member_password_resets USING ({TENANT}) WITH CHECK ({TENANT})")


def downgrade() -> None:
    with op.batch_alter_table("member_password_resets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_member_password_resets_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_member_password_resets_member_id"))
    op.drop_table("member_password_resets")
