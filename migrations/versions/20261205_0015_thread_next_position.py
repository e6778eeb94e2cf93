"""threads: next_position, the position the next appended message takes

As for conversations (0014): adding messages took ``max(position) + 1`` with no lock, so concurrent adds to one
thread collided on ``uq_thread_messages_position`` (500s); appending now raises ``next_position`` in one
``UPDATE ... RETURNING``. Existing threads start after their last message.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 16:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("next_position", sa.Integer(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE threads SET next_position = COALESCE((SELECT MAX(position) + 1 FROM thread_messages "
        "WHERE thread_messages.thread_id = threads.id), 0)"
    )
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.alter_column("next_position", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_column("next_position")
