"""Members with console passwords, and signing in through the sign-in form as a browser does."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from switchyard.platform.auth import Role
from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import TenantScope
from switchyard.platform.identity.passwords import set_password
from switchyard.platform.members.service import add_member

PASSWORD = "correct horse battery staple"
CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')
TEST_ACTOR = Actor(key_id="tests", request_id=None)


@dataclass
class ConsoleTenant:
    """A tenant made through the API, with one member per role, each with ``PASSWORD``."""

    id: str
    keys: dict[str, str]
    emails: dict[str, str] = field(default_factory=dict)
    member_ids: dict[str, str] = field(default_factory=dict)

    def headers(self, role: str = "owner") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[role]}"}


async def add_console_member(app: Any, tenant_id: str, email: str, role: Role, password: str = PASSWORD) -> str:
    async with app.state.database.unit_of_work(TenantScope(tenant_id)) as session:
        member = await add_member(
            session, scope=TenantScope(tenant_id), actor=TEST_ACTOR, actor_role=Role.OWNER, email=email, role=role
        )
        await set_password(session, scope=TenantScope(tenant_id), member_id=member.id, password=password)
    return member.id


def csrf_of(html: str) -> str:
    found = CSRF_FIELD.search(html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


async def sign_in(client: Any, email: str, password: str = PASSWORD) -> Any:
    """Open the sign-in page and submit it; returns the answer (303 on success)."""
    form = await client.get("/console/sign-in")
    assert form.status_code == 200, form.text
    return await client.post(
        "/console/sign-in", data={"email": email, "password": password, "csrf_token": csrf_of(form.text)}
    )


async def page_csrf(client: Any, path: str = "/console/") -> str:
    """The session's CSRF token, read from a page as a browser would."""
    page = await client.get(path)
    assert page.status_code == 200, page.text
    return csrf_of(page.text)
