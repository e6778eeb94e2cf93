from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.models import Thread, ThreadMessage

__all__ = ["MessageCreate", "MessagePublic", "ThreadCreate", "ThreadDeleted", "ThreadPublic"]

ACTIVE_RUN_STATUSES = ("queued", "in_progress", "requires_action", "cancelling")


class MessageCreate(BaseModel):
    """A message the client adds to a thread (a user's turn, or an assistant turn replayed from elsewhere)."""

    model_config = REQUEST_BODY

    role: Literal["user", "assistant"] = Field(default="user", description="Who said it.")
    content: str = Field(min_length=1, max_length=256_000, examples=["What is 6 x 7?"], description="The text.")


class ThreadCreate(BaseModel):
    """A new thread, optionally with its first messages."""

    model_config = REQUEST_BODY

    messages: list[MessageCreate] = Field(default_factory=list, max_length=100)
    metadata: dict[str, str] = Field(default_factory=dict, max_length=16)


class ThreadPublic(BaseModel):
    object: Literal["thread"] = "thread"
    id: str
    created_at: datetime
    metadata: dict[str, str]

    @classmethod
    def of(cls, row: Thread) -> ThreadPublic:
        return cls(id=row.id, created_at=row.created_at, metadata=dict(row.metadata_json or {}))


class ThreadDeleted(BaseModel):
    object: Literal["thread.deleted"] = "thread.deleted"
    id: str
    deleted: bool = True


class MessagePublic(BaseModel):
    """A thread message: user and assistant text, assistant tool calls, tool results."""

    object: Literal["thread.message"] = "thread.message"
    id: str
    thread_id: str
    run_id: str | None
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]]
    tool_call_id: str | None
    created_at: datetime

    @classmethod
    def of(cls, row: ThreadMessage) -> MessagePublic:
        return cls(
            id=row.id,
            thread_id=row.thread_id,
            run_id=row.run_id,
            role=row.role,
            content=row.content,
            tool_calls=list(row.tool_calls or []),
            tool_call_id=row.tool_call_id,
            created_at=row.created_at,
        )
