"""Authentication (API keys) and authorisation (roles, guards)."""

from __future__ import annotations

from switchyard.platform.auth.guards import access, require_access
from switchyard.platform.auth.keys import IssuedKey, issue_key, parse_key
from switchyard.platform.auth.principal import Principal
from switchyard.platform.auth.roles import Role

__all__ = ["IssuedKey", "Principal", "Role", "access", "issue_key", "parse_key", "require_access"]
