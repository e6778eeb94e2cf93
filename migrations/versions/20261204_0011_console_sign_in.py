"""console sign-in: members' password hashes and server-side console sessions

``member_passwords`` keeps one argon2 hash per member; ``console_sessions`` one row per signed-in browser (the
cookie's secret only as SHA-256). Both belong to a tenant and go with their member. On PostgreSQL both get the
row-level security policy of every tenant-owned table (migration 0005).

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-04 18:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

import switchyard.platform.models.base

revision: str = "0011"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("console_sessions", "member_passwords")
TENANT = "tenant_id = current_setting('switchyard.tenant_id', true)"


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def _utc() -> switchyard.platform.models.base.UTCDateTime:
    return switchyard.platform.models.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("tenant_id", _text(40), nullable=False),
        sa.Column("id", _text(40), nullable=False),
        sa.Column("token_sha256", _text(64), nullable=False),
        sa.Column("member_id", _text(40), nullable=False),
        sa.Column("csrf_token", _text(64), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("last_seen_at", _utc(), nullable=False),
        sa.Column("expires_at", _utc(), nullable=False),
        sa.Column("ended_at", _utc(), nullable=True),
        sa.ForeignKeyConstraint(["member_id"], ["members.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_sha256"),
    )
    with op.batch_alter_table("console_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_console_sessions_member_id"), ["member_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_console_sessions_tenant_id"), ["tenant_id"], unique=False)
    op.create_table(
        "member_passwords",
        sa.Column("tenant_id", _text(40), nullable=False),
        sa.Column("member_id", _text(40), nullable=False),
        sa.Column("password_hash", _text(255), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.ForeignKeyConstraint(["member_id"], ["members.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"]),
        sa.PrimaryKeyConstraint("member_id"),
    )
    with op.batch_alter_table("member_passwords", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_member_passwords_tenant_id"), ["tenant_id"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(f"CREATE POLICY tenant_isolation ON {table} USING ({TENANT}) WITH CHECK ({TENANT})")


def downgrade() -> None:
    with op.batch_alter_table("member_passwords", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_member_passwords_tenant_id"))
    op.drop_table("member_passwords")
    with op.batch_alter_table("console_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_console_sessions_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_console_sessions_member_id"))
    op.drop_table("console_sessions")
