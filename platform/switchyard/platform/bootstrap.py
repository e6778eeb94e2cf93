"""First start of an installation: an operator key, an operator console account and a demo tenant, created once."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.identity.operator_accounts import create_operator_account
from switchyard.platform.identity.passwords import first_owner_password
from switchyard.platform.models import OperatorKey
from switchyard.platform.tenants.service import create_operator_key, create_tenant

__all__ = ["FirstStart", "bootstrap"]

CLI_ACTOR = Actor(key_id="cli", request_id=None)
FIRST_OPERATOR_EMAIL = "operator@switchyard.example"  # the first start's operator console account


@dataclass(frozen=True, slots=True)
class FirstStart:
    operator_key: str
    tenant_id: str
    tenant_key: str
    owner_email: str
    owner_password: str
    """The demo owner's one-time console password, printed once."""
    operator_email: str = ""
    operator_password: str = ""
    """The first operator console account's one-time password (``/console/operator``), printed once."""


async def bootstrap(database: Database) -> FirstStart | None:
    """Create the operator key, an operator console account and the demo tenant unless an operator key already
    exists; ``None`` if it did."""
    async with database.unit_of_work(UNSCOPED) as session:
        if (await session.execute(select(func.count()).select_from(OperatorKey))).scalar_one():
            return None
        operator_key = await create_operator_key(session, actor=CLI_ACTOR, name="first start")
        tenant = await create_tenant(session, actor=CLI_ACTOR, name="Demo", owner_email="owner@demo.example")
        email, password = await first_owner_password(session, tenant_id=tenant.id)
        operator, operator_password = await create_operator_account(
            session, actor=CLI_ACTOR, email=FIRST_OPERATOR_EMAIL
        )
    return FirstStart(
        operator_key, tenant.id, tenant.owner_key.value, email, password, operator.email, operator_password
    )
