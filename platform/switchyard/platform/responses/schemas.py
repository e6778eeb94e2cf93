"""What clients send to ``/v1/responses`` and ``/v1/conversations``.

The request declares every field of OpenAI's current ``responses.create`` (as the ``openai`` package types it), so
clients and frameworks that send them are accepted; unknown fields are still refused. Input items and tools are
checked item by item in ``items`` and ``definition`` (each error names its ``input[i]`` or ``tools[i]``), since
OpenAI's item union is open-ended and a precise message beats a page of union-validation noise.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from switchyard.platform.http.bodies import REQUEST_BODY

__all__ = [
    "OUTPUT_TEXT_LOGPROBS",
    "ConversationCreate",
    "ConversationItemsCreate",
    "ConversationUpdate",
    "Includable",
    "InputTokensCount",
    "PromptReference",
    "ResponseCreate",
]

_IGNORED = "Accepted for compatibility; Switchyard ignores it."
OUTPUT_TEXT_LOGPROBS = "message.output_text.logprobs"
"""The ``include`` value that asks for the logprobs of every ``output_text``."""
FILE_SEARCH_RESULTS = "file_search_call.results"
"""The ``include`` value that shows what each ``file_search_call`` found."""
Includable = Literal[
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
]
"""What ``include`` may name: OpenAI's includable values (``openai.types.responses.ResponseIncludable``); any other
is refused with 400, as OpenAI refuses it."""


class _Strict(BaseModel):
    model_config = REQUEST_BODY


class PromptReference(_Strict):
    """A Switchyard agent as OpenAI's reusable prompt: its instructions, model, tools, parameters and limits."""

    id: str = Field(description="The agent's id.")
    version: str | None = Field(default=None, description="The agent version (latest when omitted).")
    variables: dict[str, Any] | None = Field(default=None, description="Replace `{{name}}` in the instructions.")


class ConversationRef(_Strict):
    id: str


class ResponseStreamOptions(_Strict):
    include_obfuscation: bool | None = None


class TextOptions(_Strict):
    format: dict[str, Any] | None = Field(
        default=None,
        description='`{"type": "text"}`, `{"type": "json_object"}` or `{"type": "json_schema", "name", "schema", '
        '"strict"}`; the simulator answers schema-valid JSON for the last.',
    )
    verbosity: Literal["low", "medium", "high"] | None = None


class AccessPrograms(_Strict):
    """OpenAI's domain-specific access programs (``openai.types.responses.response_create_params.AccessPrograms``)."""

    cyber: Literal["standard", "daybreak_blue", "daybreak_red"] | None = None


class ResponseCreate(_Strict):
    model: str = Field(
        min_length=1,
        max_length=256,
        description="A served model (with `prompt`, the agent's model is used instead).",
        examples=["meta-llama/Llama-3.1-8B-Instruct"],
    )
    input: str | list[dict[str, Any]] = Field(description="Text, or a list of input items.", examples=["Say hello."])
    instructions: str | None = Field(default=None, max_length=256_000)
    prompt: PromptReference | None = None
    tools: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=128,
        description="`function` tools (the client runs them), `mcp` servers and Switchyard's built-ins "
        "(`calculator`, `current_time`, `http_request`), which run on the server.",
    )
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(default=None, gt=0)
    max_tool_calls: int | None = Field(default=None, gt=0, le=1000)
    text: TextOptions | None = None
    metadata: dict[str, str] | None = Field(default=None, max_length=16)
    store: bool | None = None
    previous_response_id: str | None = Field(default=None, max_length=40)
    conversation: str | ConversationRef | None = None
    background: bool | None = None
    stream: bool | None = None
    stream_options: ResponseStreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    user: str | None = Field(default=None, max_length=256)
    truncation: Literal["auto", "disabled"] | None = None
    priority: Literal["batch", "standard", "interactive"] | None = Field(
        default=None, description="Switchyard's: the fleet's scheduling class."
    )
    include: list[Includable] | None = Field(
        default=None,
        description='`"message.output_text.logprobs"`: each `output_text` (and each `response.output_text.delta` '
        "event) carries its tokens' logprobs (an `openai-compatible` upstream's as it sent them, the simulator's "
        "synthetic). OpenAI's other includable values are accepted and ignored; anything else is refused.",
    )
    reasoning: dict[str, Any] | None = Field(default=None, description=_IGNORED)
    service_tier: str | None = Field(default=None, description=_IGNORED)
    top_logprobs: int | None = Field(
        default=None,
        ge=0,
        le=20,
        description='With `include: ["message.output_text.logprobs"]`: how many of the most likely tokens each '
        "token's logprob lists (default 0).",
    )
    prompt_cache_key: str | None = Field(
        default=None,
        description="Keeps the response's model calls on one replica of a simulated fleet (its prefix cache) while "
        "none holds the prompt's prefix yet; without it, the conversation, then the agent version.",
        max_length=256,
    )
    prompt_cache_retention: str | None = Field(default=None, description=_IGNORED)
    prompt_cache_options: dict[str, Any] | None = Field(default=None, description=_IGNORED)
    safety_identifier: str | None = Field(default=None, description=_IGNORED)
    context_management: list[dict[str, Any]] | None = Field(default=None, description=_IGNORED)
    background_options: dict[str, Any] | None = Field(default=None, description=_IGNORED)
    moderation: dict[str, Any] | None = Field(default=None, description=_IGNORED)
    access_programs: AccessPrograms | None = Field(default=None, description=_IGNORED)
    image: dict[str, Any] | None = Field(default=None, description=_IGNORED)

    @property
    def conversation_id(self) -> str | None:
        if isinstance(self.conversation, ConversationRef):
            return self.conversation.id
        return self.conversation


class ConversationCreate(_Strict):
    items: list[dict[str, Any]] | None = Field(default=None, max_length=20, description="Initial items.")
    metadata: dict[str, str] | None = Field(default=None, max_length=16)


class ConversationUpdate(_Strict):
    metadata: dict[str, str] = Field(max_length=16, examples=[{"topic": "travel"}])


class ConversationItemsCreate(_Strict):
    items: list[dict[str, Any]] = Field(
        min_length=1, max_length=20, examples=[[{"type": "message", "role": "user", "content": "Hello."}]]
    )


class InputTokensCount(_Strict):
    """``POST /v1/responses/input_tokens``: the fields of OpenAI's ``responses.input_tokens.count`` (as the ``openai``
    package types it), each meaning what it means to ``POST /v1/responses``."""

    model: str = Field(
        min_length=1,
        max_length=256,
        description="A served model: the count is this model's, checked against its context window.",
        examples=["meta-llama/Llama-3.1-8B-Instruct"],
    )
    input: str | list[dict[str, Any]] = Field(
        description="Text, or a list of input items (optional in the SDK's types, but a response needs input).",
        examples=["Say hello."],
    )
    instructions: str | None = Field(default=None, max_length=256_000)
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = Field(default=None, max_length=40)
    conversation: str | ConversationRef | None = None
    text: TextOptions | None = None
    reasoning: dict[str, Any] | None = Field(default=None, description=_IGNORED)
    truncation: Literal["auto", "disabled"] | None = None
    personality: str | None = Field(default=None, description=_IGNORED)

    def as_response(self) -> dict[str, Any]:
        """The ``POST /v1/responses`` body these fields make (what is counted is that response's first model call)."""
        return self.model_dump(mode="python", exclude_unset=True, exclude={"personality"})
