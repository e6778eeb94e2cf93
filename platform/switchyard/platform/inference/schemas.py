"""OpenAI's chat-completions wire format: what clients send, and what Switchyard answers.

The answer models document the wire format (``inference.responses`` builds the answers as dicts, exactly as OpenAI
spells them); the OpenAPI test checks real answers against them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from switchyard.platform.http.bodies import REQUEST_BODY

__all__ = [
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionCreate",
    "CompletionUsage",
    "ComputeUsage",
    "ModelList",
    "ModelPublic",
]


class _Strict(BaseModel):
    model_config = REQUEST_BODY


class TextPart(_Strict):
    type: Literal["text"]
    text: str


Content = str | list[TextPart]


class FunctionCall(_Strict):
    name: str
    arguments: str


class ToolCallIn(_Strict):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemMessage(_Strict):
    role: Literal["system", "developer"]
    content: Content
    name: str | None = None


class UserMessage(_Strict):
    role: Literal["user"]
    content: Content
    name: str | None = None


class AssistantMessage(_Strict):
    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[ToolCallIn] | None = None
    name: str | None = None
    refusal: str | None = None


class ToolMessage(_Strict):
    role: Literal["tool"]
    content: Content
    tool_call_id: str


Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]


class FunctionDefinition(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDefinition(_Strict):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(_Strict):
    name: str


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(_Strict):
    include_usage: bool = False


class ChatCompletionCreate(_Strict):
    """``POST /v1/chat/completions``: OpenAI's parameters (sampling ones are accepted; the simulator is seeded)."""

    model: str = Field(description="A model id from `GET /v1/models`.", examples=["meta-llama/Llama-3.1-8B-Instruct"])
    messages: list[Message] = Field(min_length=1, examples=[[{"role": "user", "content": "Hello"}]])
    tools: list[ToolDefinition] | None = Field(default=None, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1, description="Deprecated by OpenAI; same as below.")
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="Only 1 is supported.")
    stop: str | list[str] | None = None
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    response_format: dict[str, Any] | None = None
    user: str | None = Field(default=None, max_length=256)
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    priority: Literal["batch", "standard", "interactive"] | None = Field(
        default=None, description="Switchyard: admission tier when the fleet is saturated (default standard)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> ChatCompletionCreate:
        if None not in (self.max_tokens, self.max_completion_tokens) and self.max_tokens != self.max_completion_tokens:
            raise ValueError("give max_completion_tokens or max_tokens, not two different values")
        if isinstance(self.tool_choice, NamedToolChoice):
            names = {t.function.name for t in self.tools or ()}
            if self.tool_choice.function.name not in names:
                raise ValueError(f"tool_choice names {self.tool_choice.function.name!r}, which is not in tools")
        seen_calls: set[str] = set()
        for message in self.messages:
            if isinstance(message, AssistantMessage):
                seen_calls.update(call.id for call in message.tool_calls or ())
            elif isinstance(message, ToolMessage) and message.tool_call_id not in seen_calls:
                raise ValueError(f"tool message answers unknown tool_call_id {message.tool_call_id!r}")
        return self

    @property
    def output_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def wire_messages(self) -> list[dict[str, Any]]:
        return [m.model_dump(exclude_none=True) for m in self.messages]

    def wire_tools(self) -> list[dict[str, Any]]:
        return [t.model_dump(exclude_none=True) for t in self.tools or ()]

    def wire_tool_choice(self) -> Any:
        if isinstance(self.tool_choice, NamedToolChoice):
            return self.tool_choice.model_dump()
        return self.tool_choice


class ModelPublic(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    backend: str
    instance_type: str
    context_window: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelPublic]


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class CompletionMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None
    refusal: None = None
    tool_calls: list[ToolCallOut] | None = Field(default=None, description="Present when the model called tools.")


class CompletionChoice(BaseModel):
    index: int
    message: CompletionMessage
    logprobs: None = None
    finish_reason: str = Field(description="`stop`, `length`, `tool_calls` or `cancelled`.")


class ComputeUsage(BaseModel):
    """Switchyard's addition to OpenAI's usage: the accelerator compute attributed to the request."""

    chip_us: int = Field(description="Chip-microseconds attributed to this request (what it is billed by).")
    instance_type: str = Field(examples=["trn2.48xlarge"])
    replica: str
    queue_ms: float
    ttft_ms: float = Field(description="Time to first token, simulated or measured.")
    decode_ms: float


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    compute: ComputeUsage


class ChatCompletion(BaseModel):
    """``POST /v1/chat/completions`` without ``stream``: OpenAI's ``chat.completion`` with ``usage.compute``."""

    id: str = Field(examples=["chatcmpl-0123456789abcdef01234567"])
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(description="Unix seconds.")
    model: str
    system_fingerprint: str
    choices: list[CompletionChoice]
    usage: CompletionUsage


class ChunkChoice(BaseModel):
    index: int
    delta: dict[str, Any] = Field(description="`role`, `content` or `tool_calls` arriving with this chunk.")
    logprobs: None = None
    finish_reason: str | None


class ChatCompletionChunk(BaseModel):
    """One server-sent event of a streamed completion (``data: {...}``); the stream ends with ``data: [DONE]``.

    The last chunk before ``[DONE]`` has a ``finish_reason``; with ``stream_options.include_usage`` one more chunk
    follows with no choices and the ``usage``. An error after the stream started arrives as ``data: {"error": ...}``.
    """

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None
