"""Files (``/v1/files``, OpenAI's Files API): uploaded whole with a ``purpose``, listed, read back byte for byte,
deleted (which detaches them from every vector store)."""

from __future__ import annotations

import mimetypes
import os
from pathlib import Path
from typing import IO, Literal, Unpack

from switchyard.sdk.base_client import Call
from switchyard.sdk.models import Deleted, File
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.params import FileListParams
from switchyard.sdk.resources.base import AsyncResource, SyncResource, segment

__all__ = ["AsyncFiles", "FileInput", "FilePurpose", "Files"]

FilePurpose = Literal["assistants", "batch", "fine-tune", "vision", "user_data", "evals"]
FileInput = bytes | str | os.PathLike[str] | IO[bytes] | tuple[str, bytes] | tuple[str, bytes, str]
"""A file to upload: a path, an open binary file, ``(filename, bytes)`` or ``(filename, bytes, content type)``, or
bare bytes (named ``upload``)."""


def _part(file: FileInput) -> tuple[str, bytes, str]:
    """``file`` as (filename, bytes, content type), read once so that every retry sends the same bytes."""
    if isinstance(file, tuple):
        name, data = file[0], file[1]
        kind = file[2] if len(file) == 3 else None
    elif isinstance(file, bytes):
        name, data, kind = "upload", file, None
    elif isinstance(file, str | os.PathLike):
        path = Path(file)
        name, data, kind = path.name, path.read_bytes(), None
    else:
        name, data, kind = Path(getattr(file, "name", "upload")).name, file.read(), None
    return name, data, kind or mimetypes.guess_type(name)[0] or "application/octet-stream"


def _create(file: FileInput, purpose: FilePurpose, expires_after_seconds: int | None, key: str | None) -> Call:
    form: dict[str, str | int] = {"purpose": purpose}
    if expires_after_seconds is not None:
        form |= {"expires_after[anchor]": "created_at", "expires_after[seconds]": expires_after_seconds}
    return Call("POST", "/files", body=form, files={"file": _part(file)}, idempotency_key=key)


def _path(file_id: str, tail: str = "") -> str:
    return f"/files/{segment(file_id)}{tail}"


class Files(SyncResource):
    def create(
        self,
        *,
        file: FileInput,
        purpose: FilePurpose,
        expires_after_seconds: int | None = None,
        idempotency_key: str | None = None,
    ) -> File:
        """Upload a file; ``expires_after_seconds`` (an hour to 30 days) counts from its creation."""
        return self._client.request(_create(file, purpose, expires_after_seconds, idempotency_key), File)

    def retrieve(self, file_id: str) -> File:
        return self._client.request(Call("GET", _path(file_id)), File)

    def content(self, file_id: str) -> bytes:
        """The file's bytes, as uploaded."""
        return self._client.content(Call("GET", _path(file_id, "/content")))

    def delete(self, file_id: str) -> Deleted:
        return self._client.request(Call("DELETE", _path(file_id)), Deleted)

    def list(self, **params: Unpack[FileListParams]) -> Page[File]:
        return self._client.page(Call("GET", "/files", params=params), File)


class AsyncFiles(AsyncResource):
    async def create(
        self,
        *,
        file: FileInput,
        purpose: FilePurpose,
        expires_after_seconds: int | None = None,
        idempotency_key: str | None = None,
    ) -> File:
        return await self._client.request(_create(file, purpose, expires_after_seconds, idempotency_key), File)

    async def retrieve(self, file_id: str) -> File:
        return await self._client.request(Call("GET", _path(file_id)), File)

    async def content(self, file_id: str) -> bytes:
        return await self._client.content(Call("GET", _path(file_id, "/content")))

    async def delete(self, file_id: str) -> Deleted:
        return await self._client.request(Call("DELETE", _path(file_id)), Deleted)

    async def list(self, **params: Unpack[FileListParams]) -> AsyncPage[File]:
        return await self._client.page(Call("GET", "/files", params=params), File)
