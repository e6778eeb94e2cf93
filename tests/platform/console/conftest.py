"""Fixtures of the console tests: an HTTPS test client (the session cookie is Secure) and tenants whose members
have console passwords."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from switchyard.platform.auth import Role
from tests.platform.console.factories import ConsoleTenant, add_console_member

_counter = itertools.count()


@pytest.fixture
def console(client: Any) -> Any:
    """The app's test client, on https:// (the console's cookies are Secure), not following redirects."""
    client.base_url = "https://switchyard.test"
    client.follow_redirects = False
    return client


@pytest.fixture
def make_console_tenant(client: Any, make_tenant: Any) -> Any:
    async def make() -> ConsoleTenant:
        handle = await make_tenant()
        tenant = ConsoleTenant(id=handle.id, keys=handle.keys)
        n = next(_counter)
        for role in Role:
            email = f"{role.value}{n}@{handle.id}.example"
            tenant.emails[role.value] = email
            tenant.member_ids[role.value] = await add_console_member(client.app, handle.id, email, role)
        return tenant

    return make
