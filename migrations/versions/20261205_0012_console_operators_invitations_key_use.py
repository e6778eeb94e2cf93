"""console: operator sign-in, member invitation links, keys' last use, budgets' alert thresholds

``operator_accounts`` and ``operator_console_sessions`` are the operators' console sign-in, outside any tenant
(like ``operator_keys``). ``member_invitations`` holds one link per invited member (the secret only as SHA-256),
tenant-owned with the row-level security policy of every tenant-owned table on PostgreSQL (migration 0005).
``api_keys`` and ``operator_keys`` get ``last_used_at``; ``budgets`` get ``alert_thresholds`` (null: 50, 80, 100).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

import switchyard.platform.models.base

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT = "tenant_id = current_setting('switchyard.tenant_id', true)"


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def _utc() -> switchyard.platform.models.base.UTCDateTime:
    return switchyard.platform.models.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "operator_accounts",
        sa.Column("id", _text(40), nullable=False),
        sa.Column("email", _text(320), nullable=False),
        sa.Column("password_hash", _text(255), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("disabled_at", _utc(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("email"),
    )
    op.create_table(
        "operator_console_sessions",
        sa.Column("id", _text(40), nullable=False),
        sa.Column("token_sha256", _text(64), nullable=False),
        sa.Column("operator_id", _text(40), nullable=False),
        sa.Column("csrf_token", _text(64), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("last_seen_at", _utc(), nullable=False),
        sa.Column("expires_at", _utc(), nullable=False),
        sa.Column("ended_at", _utc(), nullable=True),
        sa.ForeignKeyConstraint(["operator_id"], ["operator_accounts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_sha256"),
    )
    with op.batch_alter_table("operator_console_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_operator_console_sessions_operator_id"), ["operator_id"], unique=False)
    op.create_table(
        "member_invitations",
        sa.Column("tenant_id", _text(40), nullable=False),
        sa.Column("id", _text(40), nullable=False),
        sa.Column("token_sha256", _text(64), nullable=False),
        sa.Column("member_id", _text(40), nullable=False),
        sa.Column("invited_by", _text(40), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("expires_at", _utc(), nullable=False),
        sa.Column("accepted_at", _utc(), nullable=True),
        sa.ForeignKeyConstraint(["member_id"], ["members.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_sha256"),
    )
    with op.batch_alter_table("member_invitations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_member_invitations_member_id"), ["member_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_member_invitations_tenant_id"), ["tenant_id"], unique=False)
    for table in ("api_keys", "operator_keys"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("last_used_at", _utc(), nullable=True))
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("alert_thresholds", sa.JSON(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE member_invitations ENABLE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY tenant_isolation ON member_invitations USING ({TENANT}) WITH CHECK ({TENANT})")


def downgrade() -> None:
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.drop_column("alert_thresholds")
    for table in ("operator_keys", "api_keys"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("last_used_at")
    with op.batch_alter_table("member_invitations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_member_invitations_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_member_invitations_member_id"))
    op.drop_table("member_invitations")
    with op.batch_alter_table("operator_console_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_operator_console_sessions_operator_id"))
    op.drop_table("operator_console_sessions")
    op.drop_table("operator_accounts")
