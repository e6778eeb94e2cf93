"""row-level security (PostgreSQL): the second layer of tenant isolation

Every tenant-owned table gets a policy that shows and accepts only the rows of the tenant named by the
transaction's ``switchyard.tenant_id`` setting. Tenant-scoped sessions switch to the NOLOGIN role
``switchyard_tenant`` for their transaction (``SET LOCAL ROLE`` through ``set_config``), so the policies bind
them even when the application connects as the tables' owner; unscoped (operator and system) sessions keep the
owner's rights. Creating the role needs CREATEROLE; where the migrating user lacks it, a DBA creates it first
(``CREATE ROLE switchyard_tenant NOLOGIN; GRANT switchyard_tenant TO <application user>``). SQLite: nothing.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 22:50:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchyard_tenant"
TENANT_TABLES = (
    "agents",
    "agent_versions",
    "api_keys",
    "audit_events",
    "budgets",
    "budget_alerts",
    "budget_reservations",
    "credits",
    "invoices",
    "invoice_lines",
    "members",
    "runs",
    "run_events",
    "threads",
    "thread_messages",
    "usage_aggregates",
    "usage_events",
)
TENANT = "tenant_id = current_setting('switchyard.tenant_id', true)"


def ensure_role(role: str) -> str:
    """The statement that creates the role if the cluster lacks it and makes the current user a member. The role
    is the cluster's, shared by its databases, and two databases may be migrated at once: a session that finds the
    role missing and then meets another's new role (or membership) at commit takes it as there."""
    return f"""DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
            BEGIN CREATE ROLE {role} NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
        END IF;
        IF NOT pg_has_role(current_user, '{role}', 'MEMBER') THEN
            BEGIN GRANT {role} TO current_user; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
        END IF;
    END $$"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(ensure_role(ROLE))
    op.execute(f"GRANT USAGE ON SCHEMA public TO {ROLE}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {ROLE}")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {ROLE}")
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY tenant_isolation ON {table} USING ({TENANT}) WITH CHECK ({TENANT})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TENANT_TABLES:
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE SELECT, INSERT, UPDATE, DELETE ON TABLES FROM {ROLE}")
    op.execute(f"REVOKE SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public FROM {ROLE}")
    op.execute(f"REVOKE USAGE ON SCHEMA public FROM {ROLE}")
    # The role is shared by every database of the cluster: it stays.
