"""Runs: an agent version executed over a thread by Celery workers, checkpointed step by step, streamed as SSE."""

from __future__ import annotations

__all__: list[str] = []
