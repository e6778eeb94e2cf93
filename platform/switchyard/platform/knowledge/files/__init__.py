"""Files (``/v1/files``, OpenAI's Files API): a tenant's uploads, kept whole in the database (their bytes apart from
their rows), bounded per file and per tenant, and detached from every vector store when deleted."""

from __future__ import annotations

__all__: list[str] = []
