"""Console passwords: argon2id hashes (``argon2-cffi``), one per member; the plaintext is never stored.

Hashing and verifying take ~150 ms of CPU and 64 MiB each at the default cost, so they run on a thread of their
own, never on the event loop that serves every tenant's requests, one at a time per process
(:data:`HASHING_THREADS`) and at a lower CPU priority (:data:`HASHING_NICE`): a flood of sign-ins waits its turn
(as coroutines, holding no thread) and takes only the cores that other requests leave, instead of the cores and
the thread pool they need. Sign-in spends its attempt allowance before it hashes, so attempts past the limit cost
no hash.
"""

from __future__ import annotations

import asyncio
import secrets
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.auth.roles import Role
from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.models import Member, MemberPassword, utc_now
from switchyard.platform.priority import lower_thread_priority

__all__ = [
    "HASHING_NICE",
    "HASHING_THREADS",
    "MAX_PASSWORD_LENGTH",
    "MIN_PASSWORD_LENGTH",
    "check_new_password",
    "configure_password_hashing",
    "first_owner_password",
    "hash_password",
    "issue_one_time_password",
    "password_needs_rehash",
    "rehash_member_password",
    "set_password",
    "verify_password",
]

MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024  # argon2 takes any length; this bounds the work one request can ask for
# argon2 runs per process at once: a hash at the default cost is ~155 ms of CPU in ~130 ms (its lanes run in
# parallel), so two at a time took a small host's every core (~17 wrong passwords in 6 s lifted another tenant's
# chat p99 from 69 to 657 ms on 2 cores)
HASHING_THREADS = 1
HASHING_NICE = 10  # how much lower the hashing thread's CPU priority is than the event loop's

_hashing = ThreadPoolExecutor(HASHING_THREADS, "password-hashing", partial(lower_thread_priority, HASHING_NICE))

_hasher = PasswordHasher()  # argon2id, RFC 9106's second recommendation (m=65536,t=3,p=4) until configured
_dummy_hash: str | None = None
"""A hash at today's cost that an unknown email's password is checked against, so that it costs what a known one
does: made at the process's first verification (on the hashing thread, whatever the email), not at import, where
every process (worker, beat, CLI) paid ~155 ms of CPU for it and again when configured."""


def configure_password_hashing(memory_kib: int, passes: int, lanes: int) -> None:
    """Hash this process's new passwords at this argon2id cost (``SWITCHYARD_PASSWORD_HASH``); existing hashes
    keep verifying whatever their cost, and :func:`password_needs_rehash` names those to hash again."""
    global _hasher, _dummy_hash
    if (_hasher.memory_cost, _hasher.time_cost, _hasher.parallelism) == (memory_kib, passes, lanes):
        return
    _hasher = PasswordHasher(time_cost=passes, memory_cost=memory_kib, parallelism=lanes)
    _dummy_hash = None


def _verify(password_hash: str | None, password: str) -> bool:
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = _hasher.hash(secrets.token_urlsafe(16))
    try:
        return _hasher.verify(password_hash or _dummy_hash, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


async def hash_password(password: str) -> str:
    """An argon2id hash of ``password`` at today's cost, computed off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_hashing, _hasher.hash, password)


async def verify_password(password_hash: str | None, password: str) -> bool:
    """Whether ``password`` matches; with no hash it still spends the same time (no timing hint of unknown emails).
    Computed off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_hashing, _verify, password_hash, password)


def password_needs_rehash(password_hash: str) -> bool:
    return _hasher.check_needs_rehash(password_hash)


def check_new_password(password: str) -> None:
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise InvalidRequest(
            f"a password has {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters",
            param="password",
            code="invalid_value",
        )


async def set_password(session: AsyncSession, *, scope: TenantScope, member_id: str, password: str) -> None:
    """Set (or replace) a member's console password."""
    check_new_password(password)
    row = await _password_row(session, scope, member_id)
    if row is None:
        row = MemberPassword(tenant_id=scope.tenant_id, member_id=member_id, password_hash="")
        session.add(row)
    row.password_hash = await hash_password(password)
    row.updated_at = utc_now()
    await session.flush()


async def rehash_member_password(
    session: AsyncSession, *, scope: TenantScope, member_id: str, password_hash: str, password: str
) -> None:
    """After a successful sign-in: the member's hash again at today's cost, if it was made at another."""
    if password_needs_rehash(password_hash):
        row = await _password_row(session, scope, member_id)
        if row is not None:
            row.password_hash = await hash_password(password)
            await session.flush()


async def _password_row(session: AsyncSession, scope: TenantScope, member_id: str) -> MemberPassword | None:
    statement = select(MemberPassword).where(
        col(MemberPassword.tenant_id) == scope.tenant_id, col(MemberPassword.member_id) == member_id
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def issue_one_time_password(session: AsyncSession, *, scope: TenantScope, member_id: str) -> str:
    """A random password for a member (the first owner at ``switchyard up``), returned to be printed once."""
    password = secrets.token_urlsafe(18)
    await set_password(session, scope=scope, member_id=member_id, password=password)
    return password


async def first_owner_password(session: AsyncSession, *, tenant_id: str) -> tuple[str, str]:
    """A one-time console password for a new tenant's first owner: ``(email, password)``, to be printed once."""
    owner = (
        await session.execute(
            select(Member)
            .where(col(Member.tenant_id) == tenant_id, col(Member.role) == Role.OWNER.value)
            .order_by(col(Member.created_at), col(Member.id))
            .limit(1)
        )
    ).scalar_one()
    password = await issue_one_time_password(session, scope=TenantScope(tenant_id), member_id=owner.id)
    return owner.email, password
