"""usage: the workflow that spent it

Every model step of a workflow run records the workflow (``usage_events.workflow_id``; null outside workflow runs),
so usage can be grouped by workflow and a workflow's budget can count its spend. The hourly and daily roll-ups
keep a group per workflow too: ``usage_aggregates.workflow_id`` (empty for none, as ``agent_id`` is) joins their
unique key. Usage recorded before this revision has no workflow (null; empty in its roll-ups). A downgrade folds
roll-ups that differed only by workflow into one row each, so the older key holds.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BUCKET_KEY = ["tenant_id", "bucket_width", "bucket_start", "api_key_id", "agent_id", "model", "instance_type"]


def upgrade() -> None:
    with op.batch_alter_table("usage_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("workflow_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True))
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("workflow_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False, server_default="")
        )
        batch_op.drop_constraint("uq_usage_aggregates_bucket", type_="unique")
        batch_op.create_unique_constraint(
            "uq_usage_aggregates_bucket", [*BUCKET_KEY[:5], "workflow_id", *BUCKET_KEY[5:]]
        )


def downgrade() -> None:
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.drop_constraint("uq_usage_aggregates_bucket", type_="unique")
        batch_op.drop_column("workflow_id")
    # rows that differed only by workflow would collide in the older key: each group is folded into its first row
    same_key = " AND ".join(f"o.{name} = usage_aggregates.{name}" for name in BUCKET_KEY)
    totals = ", ".join(
        f"{name} = (SELECT SUM(o.{name}) FROM usage_aggregates o WHERE {same_key})"
        for name in ("chip_us", "prompt_tokens", "completion_tokens", "event_count")
    )
    firsts = f"SELECT MIN(id) FROM usage_aggregates GROUP BY {', '.join(BUCKET_KEY)}"
    op.execute(f"UPDATE usage_aggregates SET {totals} WHERE id IN ({firsts})")
    op.execute(f"DELETE FROM usage_aggregates WHERE id NOT IN ({firsts})")
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.create_unique_constraint("uq_usage_aggregates_bucket", BUCKET_KEY)
    with op.batch_alter_table("usage_events", schema=None) as batch_op:
        batch_op.drop_column("workflow_id")
