"""The shapes of ``/v1/files``, as OpenAI has them: the upload form, ``FileObject`` and its deletion."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from litestar.datastructures import UploadFile
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.models import StoredFile

__all__ = [
    "MAX_EXPIRES_AFTER_SECONDS",
    "MIN_EXPIRES_AFTER_SECONDS",
    "FileDeleted",
    "FilePublic",
    "FilePurpose",
    "FileUpload",
]

FilePurpose = Literal["assistants", "batch", "fine-tune", "vision", "user_data", "evals"]
"""What a file is for (OpenAI's ``FilePurpose``); the server keeps every kind alike."""

MIN_EXPIRES_AFTER_SECONDS = 3_600
MAX_EXPIRES_AFTER_SECONDS = 30 * 86_400
"""``expires_after[seconds]`` lies between an hour and 30 days (OpenAI's bounds); a ``batch`` file without one
expires after 30 days, any other is kept until it is deleted."""


def _form_schema(schema: dict[str, Any]) -> None:
    """A form has no ``null``: an optional field is left out (so no default is shown), and the expiry policy is
    sent whole or not at all."""
    for prop in schema.get("properties", {}).values():
        prop.pop("default", None)
    schema["dependentRequired"] = {
        "expires_after[anchor]": ["expires_after[seconds]"],
        "expires_after[seconds]": ["expires_after[anchor]"],
    }


class FileUpload(BaseModel):
    """The ``multipart/form-data`` form of an upload, as OpenAI's client sends it (``expires_after`` flattened to
    ``expires_after[anchor]`` and ``expires_after[seconds]``). Form values are text: ``seconds`` is read from it."""

    model_config = ConfigDict(
        **REQUEST_BODY,
        arbitrary_types_allowed=True,
        title="FileUpload",
        json_schema_extra=_form_schema,
    )

    file: Annotated[UploadFile, WithJsonSchema({"type": "string", "format": "binary"})] = Field(
        description="The file's bytes, with its name in the part's `filename`."
    )
    purpose: FilePurpose = Field(description="What the file is for.")
    expires_after_anchor: Annotated[
        Literal["created_at"] | None, WithJsonSchema({"type": "string", "const": "created_at"})
    ] = Field(default=None, alias="expires_after[anchor]", description="What `expires_after[seconds]` counts from.")
    expires_after_seconds: Annotated[
        int | None,
        WithJsonSchema({"type": "integer", "minimum": MIN_EXPIRES_AFTER_SECONDS, "maximum": MAX_EXPIRES_AFTER_SECONDS}),
    ] = Field(
        default=None,
        alias="expires_after[seconds]",
        ge=MIN_EXPIRES_AFTER_SECONDS,
        le=MAX_EXPIRES_AFTER_SECONDS,
        strict=False,
        description="Seconds after its creation that the file expires (an hour to 30 days).",
    )

    @model_validator(mode="after")
    def _whole_policy(self) -> Self:
        if (self.expires_after_anchor is None) != (self.expires_after_seconds is None):
            raise ValueError("expires_after needs both anchor and seconds")
        return self


class FilePublic(BaseModel):
    """OpenAI's ``FileObject``."""

    id: str = Field(description="`file-` and 26 characters of Crockford base32.")
    object: Literal["file"] = "file"
    bytes: int
    created_at: int = Field(description="Unix seconds.")
    filename: str
    purpose: FilePurpose
    status: Literal["processed"] = Field(
        default="processed", description="Always `processed`: the file is stored whole when the upload answers."
    )
    expires_at: int | None = Field(default=None, description="Unix seconds; `null`: kept until deleted.")
    status_details: None = None

    @classmethod
    def of(cls, row: StoredFile) -> FilePublic:
        expires_at = int(row.expires_at.timestamp()) if row.expires_at is not None else None
        return cls(
            id=row.id,
            bytes=row.bytes,
            created_at=int(row.created_at.timestamp()),
            filename=row.filename,
            purpose=row.purpose,  # type: ignore[arg-type]  # stored from a FilePurpose
            expires_at=expires_at,
        )


class FileDeleted(BaseModel):
    """OpenAI's ``FileDeleted``."""

    id: str
    object: Literal["file"] = "file"
    deleted: bool = True
