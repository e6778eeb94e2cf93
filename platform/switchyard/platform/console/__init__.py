"""The tenant admin console: server-rendered pages under ``/console``, signed in with email and password."""

from __future__ import annotations

from switchyard.platform.console.router import console_router

__all__ = ["console_router"]
