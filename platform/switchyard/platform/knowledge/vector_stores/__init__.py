"""Vector stores (``/v1/vector_stores``): files attached to a store, ingested on the workers into chunks with their
embeddings (``ingestion``), billed in chip-µs like ``/v1/embeddings``."""

from __future__ import annotations

from switchyard.platform.knowledge.vector_stores.ingestion import INGEST_TASK, RECOVER_TASK, ingest_file

__all__ = ["INGEST_TASK", "RECOVER_TASK", "ingest_file"]
