"""The ``/v1/vector_stores`` bodies and objects, in OpenAI's shapes (``openai.types.VectorStore`` and friends).

Objects carry Unix seconds, as OpenAI's do. Request bodies are OpenAI's parameters plus two Switchyard extensions on
create: ``embedding_model`` and ``dimensions``. ``attributes`` are validated as OpenAI validates them: at most 16
keys of at most 64 characters, each value a string of at most 512 characters, a number or a boolean.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.knowledge.chunking import AutoChunkingStrategy, StaticChunking, StaticChunkingStrategy

__all__ = [
    "MAX_ATTRIBUTES",
    "Attributes",
    "AutoChunkingStrategyParam",
    "ChunkingStrategy",
    "ExpiresAfter",
    "FileBatchCreate",
    "FileBatchFile",
    "FileBatchPublic",
    "FileContentPage",
    "FileCounts",
    "LastError",
    "Metadata",
    "StaticChunkingParam",
    "StaticChunkingStrategyParam",
    "VectorStoreCreate",
    "VectorStoreDeleted",
    "VectorStoreFileCreate",
    "VectorStoreFileDeleted",
    "VectorStoreFilePublic",
    "VectorStoreFileUpdate",
    "VectorStorePublic",
    "VectorStoreUpdate",
    "unix",
]

MAX_ATTRIBUTES = 16
MAX_CREATE_FILES = 500  # OpenAI's limit on file_ids when creating a store
MAX_BATCH_FILES = 2000  # and on a batch

Metadata = Annotated[
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]],
    Field(max_length=16, description="Up to 16 string pairs: keys of 64 characters at most, values of 512."),
]
AttributeValue = Annotated[str, Field(max_length=512)] | bool | int | float
Attributes = Annotated[
    dict[Annotated[str, Field(max_length=64)], AttributeValue],
    Field(
        max_length=MAX_ATTRIBUTES,
        description="Up to 16 pairs to filter searches by: keys of 64 characters at most; values strings of 512 "
        "characters at most, numbers or booleans.",
        examples=[{"author": "Ada", "year": 1843}],
    ),
]


_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class StaticChunkingParam(StaticChunking):
    """The sizes of a static strategy, as a request gives them (integers only, as every request body's)."""

    model_config = _STRICT


class AutoChunkingStrategyParam(AutoChunkingStrategy):
    """OpenAI's default: 800-token chunks overlapping by 400 (cut to the store's model: see ``policy``)."""

    model_config = _STRICT


class StaticChunkingStrategyParam(StaticChunkingStrategy):
    """Chunks of the given sizes."""

    model_config = _STRICT

    static: StaticChunkingParam


ChunkingStrategy = Annotated[AutoChunkingStrategyParam | StaticChunkingStrategyParam, Field(discriminator="type")]
"""A request's ``chunking_strategy``: ``knowledge.chunking``'s strategies, validated strictly."""


def unix(moment: datetime | None) -> int | None:
    """A stored time as OpenAI's Unix seconds."""
    return None if moment is None else int(moment.timestamp())


class ExpiresAfter(BaseModel):
    """When a store expires: ``days`` after it was last active."""

    model_config = REQUEST_BODY

    anchor: Literal["last_active_at"] = Field(description="The only anchor: the store's last activity.")
    days: int = Field(ge=1, le=365, description="Days after the anchor, 1 to 365.")


class VectorStoreCreate(BaseModel):
    """``POST /v1/vector_stores``: OpenAI's parameters, plus Switchyard's ``embedding_model`` and ``dimensions``."""

    model_config = REQUEST_BODY

    name: str | None = Field(default=None, max_length=256, description="The store's name.")
    description: str | None = Field(default=None, max_length=512, description="Accepted; not stored.")
    file_ids: list[str] = Field(
        default_factory=list, max_length=MAX_CREATE_FILES, description="Files (`/v1/files`) to attach at once."
    )
    chunking_strategy: ChunkingStrategy | None = Field(
        default=None, description="How its files are chunked unless attached with their own; default `auto`."
    )
    expires_after: ExpiresAfter | None = Field(default=None, description="Expire the store after inactivity.")
    metadata: Metadata | None = None
    embedding_model: str | None = Field(
        default=None,
        max_length=256,
        description="Switchyard: the embedding model (`GET /v1/models`) its chunks are embedded with; default "
        "`SWITCHYARD_VECTOR_STORE_EMBEDDING_MODEL`.",
        examples=["BAAI/bge-large-en-v1.5"],
    )
    dimensions: int | None = Field(
        default=None,
        ge=1,
        description="Switchyard: the vectors' length, within what the model allows (Qwen3-Embedding: 32-4096); "
        "default the model's own.",
    )


class VectorStoreUpdate(BaseModel):
    """``POST /v1/vector_stores/{id}``: only the fields sent change; ``expires_after: null`` removes the policy."""

    model_config = REQUEST_BODY

    name: str | None = Field(default=None, max_length=256)
    expires_after: ExpiresAfter | None = None
    metadata: Metadata | None = None


class VectorStoreFileCreate(BaseModel):
    """``POST /v1/vector_stores/{id}/files``: attach one file."""

    model_config = REQUEST_BODY

    file_id: str = Field(max_length=40, description="A file of `/v1/files`.", examples=["file-abc123"])
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = Field(default=None, description="Default: the store's.")


class FileBatchFile(BaseModel):
    """One file of a batch with its own attributes and chunking strategy."""

    model_config = REQUEST_BODY

    file_id: str = Field(max_length=40)
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None


class FileBatchCreate(BaseModel):
    """``POST /v1/vector_stores/{id}/file_batches``: ``file_ids`` (sharing ``attributes`` and
    ``chunking_strategy``) or ``files`` (each with its own), not both."""

    model_config = REQUEST_BODY

    file_ids: list[Annotated[str, Field(max_length=40)]] | None = Field(default=None, max_length=MAX_BATCH_FILES)
    files: list[FileBatchFile] | None = Field(default=None, max_length=MAX_BATCH_FILES)
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None

    def entries(self) -> list[FileBatchFile]:
        """Each file of the batch with the attributes and strategy it is attached with."""
        if self.files is not None:
            return list(self.files)
        return [
            FileBatchFile(file_id=file_id, attributes=self.attributes, chunking_strategy=self.chunking_strategy)
            for file_id in self.file_ids or []
        ]


class VectorStoreFileUpdate(BaseModel):
    """``POST /v1/vector_stores/{id}/files/{file_id}``: replace the file's attributes (``null`` clears them)."""

    model_config = REQUEST_BODY

    attributes: Attributes | None = Field(
        description="The new attributes (all of them), or null for none.", examples=[{"author": "Ada", "year": 1843}]
    )


class FileCounts(BaseModel):
    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    total: int = 0


class VectorStorePublic(BaseModel):
    """OpenAI's ``vector_store`` object, with Switchyard's ``embedding_model`` and ``dimensions``."""

    id: str
    object: Literal["vector_store"] = "vector_store"
    created_at: int
    name: str
    usage_bytes: int = Field(description="Bytes of its chunks' text.")
    file_counts: FileCounts
    status: Literal["expired", "in_progress", "completed"]
    expires_after: dict[str, Any] | None
    expires_at: int | None
    last_active_at: int | None
    metadata: dict[str, str]
    embedding_model: str
    dimensions: int


class VectorStoreDeleted(BaseModel):
    id: str
    object: Literal["vector_store.deleted"] = "vector_store.deleted"
    deleted: bool = True


class LastError(BaseModel):
    code: Literal["server_error", "unsupported_file", "invalid_file"]
    message: str


class VectorStoreFilePublic(BaseModel):
    """OpenAI's ``vector_store.file``; its ``id`` is the file's."""

    id: str
    object: Literal["vector_store.file"] = "vector_store.file"
    created_at: int
    usage_bytes: int
    vector_store_id: str
    status: Literal["in_progress", "completed", "cancelled", "failed"]
    last_error: LastError | None
    chunking_strategy: dict[str, Any]
    attributes: dict[str, Any]


class VectorStoreFileDeleted(BaseModel):
    id: str
    object: Literal["vector_store.file.deleted"] = "vector_store.file.deleted"
    deleted: bool = True


class FileBatchPublic(BaseModel):
    """OpenAI's ``vector_store.files_batch``."""

    id: str
    object: Literal["vector_store.files_batch"] = "vector_store.files_batch"
    created_at: int
    vector_store_id: str
    status: Literal["in_progress", "completed", "cancelled", "failed"]
    file_counts: FileCounts


class FileContentPart(BaseModel):
    type: Literal["text"] = "text"
    text: str


class FileContentPage(BaseModel):
    """``GET .../files/{file_id}/content``: the file's parsed chunks, in order."""

    object: Literal["vector_store.file_content.page"] = "vector_store.file_content.page"
    data: list[FileContentPart]
    has_more: bool = False
    next_page: str | None = None
