"""agents: kind, ``agent`` or ``workflow``

A workflow (a graph of agents, decisions, loops and approvals) is stored, versioned, run, budgeted and billed as an
agent is, in the same tables; ``kind`` tells the two apart for ``/v1/agents`` and ``/v1/workflows``.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06 06:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=16), nullable=False, server_default="agent"))


def downgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_column("kind")
