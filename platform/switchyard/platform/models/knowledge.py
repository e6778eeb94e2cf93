"""Knowledge: uploaded files, vector stores, the files attached to them and the chunks they are searched by."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, LargeBinary, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["FileContent", "KnowledgeChunk", "StoredFile", "VectorStore", "VectorStoreFile", "VectorStoreFileBatch"]


class StoredFile(TenantOwned, table=True):
    """A ``/v1/files`` file: its name, purpose and size (its bytes are a :class:`FileContent`)."""

    __tablename__ = "files"

    id: str = Field(primary_key=True, max_length=40, description="file-…")
    filename: str = Field(max_length=512)
    purpose: str = Field(max_length=32, description="assistants, user_data, batch, fine-tune, vision, evals")
    bytes: int = Field(sa_type=BigInteger)
    content_type: str | None = Field(default=None, max_length=128)
    sha256: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    deleted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class FileContent(TenantOwned, table=True):
    """A file's bytes, apart so that listing files reads none of them (removed when the file is deleted)."""

    __tablename__ = "file_contents"

    file_id: str = Field(primary_key=True, foreign_key="files.id", max_length=40)
    data: bytes = Field(sa_type=LargeBinary)


class VectorStore(TenantOwned, table=True):
    """A ``/v1/vector_stores`` store: the files searched together, embedded with one model at one dimension."""

    __tablename__ = "vector_stores"

    id: str = Field(primary_key=True, max_length=40, description="vs_…")
    name: str = Field(default="", max_length=256)
    embedding_model: str = Field(max_length=256, description="the pool's embedding model its chunks are embedded by")
    dimensions: int = Field(description="the length its vectors are cut to (a Matryoshka model's prefix)")
    chunking_strategy: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="the default for files")
    expires_after: dict[str, Any] | None = Field(default=None, sa_type=JSON, description="{anchor, days}")
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_active_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    metadata_json: dict[str, str] = Field(default_factory=dict, sa_type=JSON)
    usage_bytes: int = Field(default=0, sa_type=BigInteger, description="the bytes of its chunks' text")
    revision: int = Field(default=0, description="incremented whenever its chunks change (caches key on it)")
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    deleted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class VectorStoreFileBatch(TenantOwned, table=True):
    """A ``/file_batches`` batch: files attached together (their counts are the files' statuses)."""

    __tablename__ = "vector_store_file_batches"

    id: str = Field(primary_key=True, max_length=40, description="vsfb_…")
    vector_store_id: str = Field(foreign_key="vector_stores.id", index=True, max_length=40)
    status: str = Field(default="in_progress", max_length=16, description="in_progress, completed, cancelled, failed")
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


class VectorStoreFile(TenantOwned, table=True):
    """A file attached to a vector store and its ingestion: parsed, chunked, each chunk embedded and indexed.

    ``chunks_done`` is how many of its chunks are stored (each with its embedding, billed once): a worker killed
    mid-file resumes after them."""

    __tablename__ = "vector_store_files"
    __table_args__ = (UniqueConstraint("vector_store_id", "file_id", name="uq_vector_store_files_file"),)

    row_id: str = Field(primary_key=True, max_length=40)
    vector_store_id: str = Field(foreign_key="vector_stores.id", index=True, max_length=40)
    file_id: str = Field(foreign_key="files.id", index=True, max_length=40)
    batch_id: str | None = Field(default=None, index=True, max_length=40)
    api_key_id: str | None = Field(
        default=None, max_length=40, description="the key that attached it: its ingestion is billed to that key"
    )
    status: str = Field(default="in_progress", max_length=16, description="in_progress, completed, cancelled, failed")
    last_error: dict[str, Any] | None = Field(default=None, sa_type=JSON, description="{code, message}")
    chunking_strategy: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    attributes: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="filterable, 16 at most")
    chunks_total: int | None = Field(default=None, description="known once the file is parsed and chunked")
    chunks_done: int = Field(default=0)
    usage_bytes: int = Field(default=0, sa_type=BigInteger)
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


class KnowledgeChunk(TenantOwned, table=True):
    """One chunk of a file in a vector store: its text, where it is in the file, and its unit vector (little-endian
    float32, the store's ``dimensions`` long). ``(vector_store_id, file_id, position)`` is unique: a chunk stored
    twice (a resumed ingestion) is stored once."""

    __tablename__ = "knowledge_chunks"
    __table_args__ = (UniqueConstraint("vector_store_id", "file_id", "position", name="uq_knowledge_chunks_position"),)

    id: str = Field(primary_key=True, max_length=40)
    vector_store_id: str = Field(foreign_key="vector_stores.id", index=True, max_length=40)
    file_id: str = Field(foreign_key="files.id", index=True, max_length=40)
    position: int = Field(description="the chunk's index in its file")
    text: str
    tokens: int
    char_start: int
    char_end: int
    embedding: bytes = Field(sa_type=LargeBinary)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
