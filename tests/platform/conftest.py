"""Factories for the platform's API tests: they act through the API, as users do."""

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
    async def make(name: str | None = None) -> TenantHandle:
        name = name or f"tenant-{next(_counter)}"
        response = await client.post("/v1/admin/tenants", json={"name": name}, headers=bearer(operator_key))
        assert response.status_code == 201, response.text
        body = response.json()
        tenant = TenantHandle(id=body["id"], keys={"owner": body["owner_key"]["value"]})
        for role in ("admin", "developer", "viewer"):
            created = await client.post("/v1/api-keys", json={"role": role}, headers=tenant.headers())
            assert created.status_code == 201, created.text
            tenant.keys[role] = created.json()["value"]
        return tenant

    return make


@pytest.fixture
def operator_headers(operator_key: str) -> dict[str, str]:
    return bearer(operator_key)
