"""usage: the prompt tokens a replica read from its prefix cache

Every usage event records how many of its prompt tokens the serving replica read from its prefix cache
(``usage_events.cached_tokens``: an ``openai-compatible`` upstream's own count when it reports one), and the hourly
and daily roll-ups sum them (``usage_aggregates.cached_tokens``), so ``/v1/usage`` reports ``input_cached_tokens``.
Usage recorded before this revision read nothing from a cache: 0, in its events and its roll-ups alike.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 14:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("usage_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cached_tokens", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cached_tokens", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.drop_column("cached_tokens")
    with op.batch_alter_table("usage_events", schema=None) as batch_op:
        batch_op.drop_column("cached_tokens")
