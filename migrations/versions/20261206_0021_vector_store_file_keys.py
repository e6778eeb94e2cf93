"""vector store files: the API key that attached each one

``vector_store_files.api_key_id`` names the key that attached the file (null when a member attached it in the
console, and for files attached before this revision): ingestion's embedding calls are admitted and billed as that
key's (its rates and budgets; ``/v1/usage?group_by=api_key_id``), as ``/v1/embeddings`` calls are.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("vector_store_files", schema=None) as batch_op:
        batch_op.add_column(sa.Column("api_key_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("vector_store_files", schema=None) as batch_op:
        batch_op.drop_column("api_key_id")
