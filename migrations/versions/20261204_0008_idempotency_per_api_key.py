"""idempotency records per API key, with sealed answers

Records were per tenant and kept the response in clear (a created key's secret among them). Now they belong to
the API key that sent the request (``api_key_id``) and keep the answer's headers and body only encrypted under a
key derived from that key's secret (``response_sealed``). The stored rows are a 24-hour cache that the new format
cannot read, so both directions delete them: a retry after the upgrade runs again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DELETE FROM idempotency_records")
    with op.batch_alter_table("idempotency_records", schema=None) as batch_op:
        batch_op.drop_constraint("uq_idempotency_owner_key", type_="unique")
        batch_op.alter_column("owner", new_column_name="api_key_id")
        batch_op.drop_column("content_type")
        batch_op.drop_column("response_body")
        batch_op.add_column(sa.Column("response_sealed", sa.LargeBinary(), nullable=True))
    with op.batch_alter_table("idempotency_records", schema=None) as batch_op:  # after the rename, on its own
        batch_op.create_unique_constraint("uq_idempotency_api_key_key", ["api_key_id", "key"])


def downgrade() -> None:
    op.execute("DELETE FROM idempotency_records")
    with op.batch_alter_table("idempotency_records", schema=None) as batch_op:
        batch_op.drop_constraint("uq_idempotency_api_key_key", type_="unique")
        batch_op.alter_column("api_key_id", new_column_name="owner")
        batch_op.drop_column("response_sealed")
        batch_op.add_column(sa.Column("content_type", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True))
        batch_op.add_column(sa.Column("response_body", sa.LargeBinary(), nullable=True))
    with op.batch_alter_table("idempotency_records", schema=None) as batch_op:
        batch_op.create_unique_constraint("uq_idempotency_owner_key", ["owner", "key"])
