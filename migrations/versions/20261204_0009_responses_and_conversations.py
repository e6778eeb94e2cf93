"""responses and conversations (``/v1/responses``, ``/v1/conversations``)

Responses keep their request, input items, output and the run loop's checkpoint, with a lease as runs have;
background responses keep their stream events; conversations keep their items in order. Every table is
tenant-owned and gets the row-level-security policy of 0005 on PostgreSQL.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 18:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

import switchyard.platform.models.base

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


TABLES = ("conversations", "conversation_items", "responses", "response_events")
TENANT = "tenant_id = current_setting('switchyard.tenant_id', true)"


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("tenant_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("metadata_json", sa.JSON(), nullable=False),
        sa.Column("created_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("deleted_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_conversations_tenant_id"), ["tenant_id"], unique=False)

    op.create_table(
        "responses",
        sa.Column("tenant_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("api_key_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("agent_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("agent_version", sa.Integer(), nullable=True),
        sa.Column("conversation_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("previous_response_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("background", sa.Boolean(), nullable=False),
        sa.Column("stored", sa.Boolean(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("input_items", sa.JSON(), nullable=False),
        sa.Column("output", sa.JSON(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("chip_us", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column("lease_expires_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("responses", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_responses_conversation_id"), ["conversation_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_responses_lease_expires_at"), ["lease_expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_responses_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_responses_tenant_id"), ["tenant_id"], unique=False)

    op.create_table(
        "conversation_items",
        sa.Column("tenant_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("row_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("conversation_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("response_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("item", sa.JSON(), nullable=False),
        sa.Column("created_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
        ),
        sa.PrimaryKeyConstraint("row_id"),
        sa.UniqueConstraint("conversation_id", "position", name="uq_conversation_items_position"),
    )
    with op.batch_alter_table("conversation_items", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_conversation_items_conversation_id"), ["conversation_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_conversation_items_id"), ["id"], unique=False)
        batch_op.create_index(batch_op.f("ix_conversation_items_tenant_id"), ["tenant_id"], unique=False)

    op.create_table(
        "response_events",
        sa.Column("tenant_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("response_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("sequence_number", sa.Integer(), nullable=False),
        sa.Column("event", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", switchyard.platform.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["response_id"],
            ["responses.id"],
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("response_id", "sequence_number", name="uq_response_events_sequence"),
    )
    with op.batch_alter_table("response_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_response_events_response_id"), ["response_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_response_events_tenant_id"), ["tenant_id"], unique=False)

    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(f"CREATE POLICY tenant_isolation ON {table} USING ({TENANT}) WITH CHECK ({TENANT})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
    with op.batch_alter_table("response_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_response_events_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_response_events_response_id"))

    op.drop_table("response_events")
    with op.batch_alter_table("conversation_items", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_conversation_items_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_conversation_items_id"))
        batch_op.drop_index(batch_op.f("ix_conversation_items_conversation_id"))

    op.drop_table("conversation_items")
    with op.batch_alter_table("responses", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_responses_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_responses_status"))
        batch_op.drop_index(batch_op.f("ix_responses_lease_expires_at"))
        batch_op.drop_index(batch_op.f("ix_responses_conversation_id"))

    op.drop_table("responses")
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_conversations_tenant_id"))

    op.drop_table("conversations")
