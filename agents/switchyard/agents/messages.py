"""Conversation messages and tool calls, in OpenAI chat-completions shape (plain JSON-serialisable data)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Message", "Role", "ToolCall", "Usage"]

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """One tool call the model asked for. ``arguments`` is the JSON text the model produced."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a JSON object; raises ``ValueError`` when the model produced anything else."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


class Message(BaseModel):
    """A thread or run message: user/assistant text, assistant tool calls, or a tool result."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = Field(default=None, description="for role='tool': the call this answers")
    id: str | None = Field(default=None, description="the platform's message id, when it has one")
    refusal: bool = Field(default=False, description="an assistant answer that is the model's refusal (in content)")

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str | None = None, tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()) -> Message:
        return cls(role="assistant", content=content, tool_calls=tuple(tool_calls))

    @classmethod
    def tool(cls, tool_call_id: str, content: str) -> Message:
        return cls(role="tool", tool_call_id=tool_call_id, content=content)

    def to_openai(self) -> dict[str, Any]:
        """The ``messages[]`` entry of an OpenAI chat-completions request."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


class Usage(BaseModel):
    """Tokens of one model call or of a whole run."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    """Of ``input_tokens``, those the serving replica read from its prefix cache instead of computing them."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens
