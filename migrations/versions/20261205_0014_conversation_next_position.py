"""conversations: next_position, the position the next appended item takes

Appending items took ``max(position) + 1`` with no lock, so concurrent appends to one conversation collided on
``uq_conversation_items_position`` (500s). Appending now raises ``next_position`` in one ``UPDATE ... RETURNING``:
the row lock (PostgreSQL) or the write lock (SQLite) serialises appends. Existing conversations start after their
last item.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05 16:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("next_position", sa.Integer(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE conversations SET next_position = COALESCE((SELECT MAX(position) + 1 FROM conversation_items "
        "WHERE conversation_items.conversation_id = conversations.id), 0)"
    )
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.alter_column("next_position", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("next_position")
