"""Members with console passwords, and signing in through the sign-in form as a browser does."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from switchyard.platform.auth import Role
from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import TenantScope
from switchyard.platform.identity.passwords import check_new_password, hash_password, password_needs_rehash
from switchyard.platform.members.service import add_member
from switchyard.platform.models import MemberPassword

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


_hashes: dict[str, str] = {}


async def password_hash(password: str) -> str:
    """An argon2id hash of ``password`` at today's cost, made by the platform's hasher once per cost and shared by the
    members the tests make (a hash is ~20 ms of CPU on the app's one low-priority hashing thread, and two console
    tenants are eight members; signing in still verifies the hash, and the tests of setting a password set it)."""
    known = _hashes.get(password)
    if known is None or password_needs_rehash(known):
        known = _hashes[password] = await hash_password(password)
    return known


async def add_console_member(app: Any, tenant_id: str, email: str, role: Role, password: str = PASSWORD) -> str:
    """A member of ``tenant_id`` with a console password."""
    check_new_password(password)
    scope = TenantScope(tenant_id)
    async with app.state.database.unit_of_work(scope) as session:
        member = await add_member(session, scope=scope, actor=TEST_ACTOR, actor_role=Role.OWNER, email=email, role=role)
        hashed = await password_hash(password)
        session.add(MemberPassword(tenant_id=tenant_id, member_id=member.id, password_hash=hashed))
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
