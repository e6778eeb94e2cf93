"""Member roles, ordered by what they may do."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Role"]


class Role(StrEnum):
    """A member's (or key's) role in a tenant: each includes everything the ones below it may do."""

    VIEWER = "viewer"
    DEVELOPER = "developer"
    ADMIN = "admin"
    OWNER = "owner"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    def includes(self, other: Role | str) -> bool:
        """Whether this role may do what ``other`` (a role or its name: the console's templates pass names) may."""
        return self.rank >= Role(other).rank


_RANKS = {Role.VIEWER: 0, Role.DEVELOPER: 1, Role.ADMIN: 2, Role.OWNER: 3}
