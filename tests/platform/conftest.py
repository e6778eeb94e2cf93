"""Factories for the platform's API tests. The tests act through the API, as users do; the tenants they act in are
made by the tenant service, as the operator key's ``POST /v1/admin/tenants`` makes them, with a key per role issued
by the owner's key, in one unit of work: a third of the CPU of those four API requests (tenant creation and key
issuance through the API have tests of their own)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest

_counter = itertools.count()


@dataclass
class TenantHandle:
    """A tenant made through the API, with keys for each role."""

    id: str
    keys: dict[str, str]

    def headers(self, role: str = "owner") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[role]}"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def operator_key(client: Any) -> str:
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.tenants.service import create_operator_key

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return await create_operator_key(session, actor=CLI_ACTOR, name="tests")


@pytest.fixture
def make_tenant(client: Any, operator_key: str) -> Any:
    from sqlalchemy import select
    from sqlmodel import col

    from switchyard.platform.api_keys.service import create_key
    from switchyard.platform.auth import Role
    from switchyard.platform.auth.keys import parse_key
    from switchyard.platform.auth.principal import Actor
    from switchyard.platform.db import UNSCOPED, TenantScope
    from switchyard.platform.models import OperatorKey
    from switchyard.platform.tenants.service import create_tenant

    parsed = parse_key(operator_key)
    assert parsed is not None

    async def make(name: str | None = None) -> TenantHandle:
        name = name or f"tenant-{next(_counter)}"
        async with client.app.state.database.unit_of_work(UNSCOPED) as session:
            found = select(col(OperatorKey.id)).where(col(OperatorKey.short_id) == parsed.short_id)
            operator = Actor(key_id=(await session.execute(found)).scalar_one(), request_id=None)
            created = await create_tenant(session, actor=operator, name=name, owner_email=None)
            tenant = TenantHandle(id=created.id, keys={"owner": created.owner_key.value})
            owner = Actor(key_id=created.owner_key.id, request_id=None)
            for role in (Role.ADMIN, Role.DEVELOPER, Role.VIEWER):
                key = await create_key(
                    session, scope=TenantScope(created.id), actor=owner, actor_role=Role.OWNER, role=role
                )
                tenant.keys[role.value] = key.value
        return tenant

    return make


@pytest.fixture
def operator_headers(operator_key: str) -> dict[str, str]:
    return bearer(operator_key)
