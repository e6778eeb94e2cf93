"""Workflows: versioned graphs of agents, decisions, bounded loops and approvals (``switchyard.agents.workflows``),
stored, run, budgeted and billed as agents are (an agent row of kind ``workflow``)."""

from __future__ import annotations

__all__: list[str] = []
