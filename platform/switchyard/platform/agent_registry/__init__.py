"""Agents: named, versioned definitions (``switchyard.agents.AgentSpec``) that runs execute."""

from __future__ import annotations

__all__: list[str] = []
