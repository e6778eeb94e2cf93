"""Threads: ordered conversations of messages, the input and output of runs."""

from __future__ import annotations

__all__: list[str] = []
