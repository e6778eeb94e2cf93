"""Knowledge: tenants' files and vector stores, and the pure steps that turn a file into searchable chunks.

So far the pure foundations (issue 25): ``parsing`` (a file's bytes as plain text) and ``chunking`` (that text
as overlapping token windows, by OpenAI's chunking strategies). Embedding the chunks is the accelerator pool's
(``switchyard.accelerator.pool.embeddings``); storage, ingestion jobs, search and the HTTP API build on these.
"""

from __future__ import annotations

from switchyard.platform.knowledge.chunking import (
    AUTO_CHUNK_OVERLAP_TOKENS,
    AUTO_MAX_CHUNK_SIZE_TOKENS,
    AutoChunkingStrategy,
    Chunk,
    ChunkingStrategy,
    StaticChunking,
    StaticChunkingStrategy,
    chunk_text,
    static_chunking,
)
from switchyard.platform.knowledge.parsing import (
    MAX_JSON_DEPTH,
    SUPPORTED_TYPES,
    DocumentError,
    DocumentKind,
    DocumentTooLarge,
    MalformedDocument,
    ParsedDocument,
    ParseLimits,
    UndecodableDocument,
    UnsupportedDocumentType,
    document_kind,
    parse_document,
)

__all__ = [
    "AUTO_CHUNK_OVERLAP_TOKENS",
    "AUTO_MAX_CHUNK_SIZE_TOKENS",
    "MAX_JSON_DEPTH",
    "SUPPORTED_TYPES",
    "AutoChunkingStrategy",
    "Chunk",
    "ChunkingStrategy",
    "DocumentError",
    "DocumentKind",
    "DocumentTooLarge",
    "MalformedDocument",
    "ParseLimits",
    "ParsedDocument",
    "StaticChunking",
    "StaticChunkingStrategy",
    "UndecodableDocument",
    "UnsupportedDocumentType",
    "chunk_text",
    "document_kind",
    "parse_document",
    "static_chunking",
]
