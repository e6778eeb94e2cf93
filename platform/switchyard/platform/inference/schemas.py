"""OpenAI's chat-completions wire format: what clients send, and what Switchyard answers.

The request models declare every parameter of OpenAI's current chat-completions request (as the ``openai``
package types it), so clients and frameworks that send them are accepted; unknown fields are still refused. What
the client sent is forwarded unchanged to ``openai-compatible`` upstreams (``forwarded_parameters``); the ``sim``
model honours ``response_format``, ``stop``, tools, ``max_tokens``, ``seed``, ``logprobs``/``top_logprobs``
(synthetic logprobs) and vLLM's ``ignore_eos``/``min_tokens`` extensions, and ignores the rest.

The answer models document the wire format (``inference.completions`` builds the answers as dicts, exactly as OpenAI
spells them); the OpenAPI test checks real answers against them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

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

_IGNORED = "Forwarded to `openai-compatible` upstreams; the simulator ignores it."
SWITCHYARD_FIELDS = frozenset({"priority"})
"""Request fields that are Switchyard's own, not OpenAI's: never forwarded to an upstream."""


class _Strict(BaseModel):
    model_config = REQUEST_BODY


class PromptCacheBreakpoint(_Strict):
    mode: Literal["explicit"]
    ttl: Literal["30m", "12h"] | None = None


class CacheControl(_Strict):
    """Anthropic's cache marker on a text part, which LiteLLM and its users send to every provider."""

    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class TextPart(_Strict):
    type: Literal["text"]
    text: str
    prompt_cache_breakpoint: PromptCacheBreakpoint | None = None
    cache_control: CacheControl | None = None


class ImageUrl(_Strict):
    url: str = Field(description="An `https:` URL or a `data:` URL with the base64-encoded image.")
    detail: Literal["auto", "low", "high", "original"] | None = None


class ImagePart(_Strict):
    type: Literal["image_url"]
    image_url: ImageUrl
    prompt_cache_breakpoint: PromptCacheBreakpoint | None = None


class InputAudio(_Strict):
    data: str = Field(description="Base64-encoded audio.")
    format: Literal["wav", "mp3"]


class AudioPart(_Strict):
    type: Literal["input_audio"]
    input_audio: InputAudio
    prompt_cache_breakpoint: PromptCacheBreakpoint | None = None


class FileInput(_Strict):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(_Strict):
    type: Literal["file"]
    file: FileInput
    prompt_cache_breakpoint: PromptCacheBreakpoint | None = None


class RefusalPart(_Strict):
    type: Literal["refusal"]
    refusal: str


TextContent = str | list[TextPart]
UserContentPart = Annotated[TextPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")]
AssistantContentPart = Annotated[TextPart | RefusalPart, Field(discriminator="type")]


class FunctionCall(_Strict):
    name: str
    arguments: str


class ToolCallIn(_Strict):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class CustomCall(_Strict):
    name: str
    input: str


class CustomToolCallIn(_Strict):
    id: str
    type: Literal["custom"]
    custom: CustomCall


class AssistantAudio(_Strict):
    id: str = Field(description="The id of an earlier audio answer.")


class SystemMessage(_Strict):
    role: Literal["system", "developer"]
    content: TextContent
    name: str | None = None


class UserMessage(_Strict):
    role: Literal["user"]
    content: str | list[UserContentPart]
    name: str | None = None


class AssistantMessage(_Strict):
    role: Literal["assistant"]
    content: str | list[AssistantContentPart] | None = None
    tool_calls: list[ToolCallIn | CustomToolCallIn] | None = None
    function_call: FunctionCall | None = Field(default=None, description="Deprecated by OpenAI for `tool_calls`.")
    audio: AssistantAudio | None = None
    name: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = Field(
        default=None,
        exclude=True,
        description="The reasoning a reasoning model answered earlier (vLLM's and DeepSeek's field, which clients "
        "send back): accepted and dropped, since no served model reasons; never counted or forwarded.",
    )


class ToolMessage(_Strict):
    role: Literal["tool"]
    content: TextContent
    tool_call_id: str
    name: str | None = Field(default=None, description="Not OpenAI's, but LiteLLM's idiom: the tool's name.")


class FunctionMessage(_Strict):
    """Deprecated by OpenAI for ``tool`` messages: a legacy ``function_call``'s result."""

    role: Literal["function"]
    content: str | None
    name: str


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage | FunctionMessage, Field(discriminator="role")
]


class FunctionDefinition(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDefinition(_Strict):
    type: Literal["function"]
    function: FunctionDefinition


class TextGrammarFormat(_Strict):
    type: Literal["text"]


class Grammar(_Strict):
    definition: str
    syntax: Literal["lark", "regex"]


class GrammarFormat(_Strict):
    type: Literal["grammar"]
    grammar: Grammar


class CustomToolDefinition(_Strict):
    name: str
    description: str | None = None
    format: Annotated[TextGrammarFormat | GrammarFormat, Field(discriminator="type")] | None = None


class CustomTool(_Strict):
    type: Literal["custom"]
    custom: CustomToolDefinition


Tool = Annotated[ToolDefinition | CustomTool, Field(discriminator="type")]


class NamedFunction(_Strict):
    name: str


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: NamedFunction


class NamedCustomToolChoice(_Strict):
    type: Literal["custom"]
    custom: NamedFunction


class AllowedTools(_Strict):
    mode: Literal["auto", "required"]
    tools: list[dict[str, Any]] = Field(
        description='Tool definitions, each as in `tool_choice`: `{"type": "function", "function": {"name": ...}}`.'
    )


class AllowedToolsChoice(_Strict):
    type: Literal["allowed_tools"]
    allowed_tools: AllowedTools


ToolChoice = Annotated[NamedToolChoice | NamedCustomToolChoice | AllowedToolsChoice, Field(discriminator="type")]


class LegacyFunction(_Strict):
    """Deprecated by OpenAI for ``tools``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None


class TextFormat(_Strict):
    type: Literal["text"]


class JsonObjectFormat(_Strict):
    type: Literal["json_object"]


class JsonSchema(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema", description="A JSON Schema.")
    strict: bool | None = None


class JsonSchemaFormat(_Strict):
    type: Literal["json_schema"]
    json_schema: JsonSchema


ResponseFormat = Annotated[TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")]


class StreamOptions(_Strict):
    include_usage: bool = False
    include_obfuscation: bool | None = None


class AudioVoice(_Strict):
    id: str


class AudioOutput(_Strict):
    format: Literal["wav", "aac", "mp3", "flac", "opus", "pcm16"]
    voice: str | AudioVoice


class Prediction(_Strict):
    type: Literal["content"]
    content: TextContent


class ApproximateLocation(_Strict):
    city: str | None = None
    country: str | None = None
    region: str | None = None
    timezone: str | None = None


class UserLocation(_Strict):
    type: Literal["approximate"]
    approximate: ApproximateLocation


class WebSearchOptions(_Strict):
    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: UserLocation | None = None


class ModerationMode(_Strict):
    mode: Literal["score", "block"]


class ModerationPolicy(_Strict):
    input: ModerationMode | None = None
    output: ModerationMode | None = None


class Moderation(_Strict):
    model: str
    policy: ModerationPolicy | None = None


class PromptCacheOptions(_Strict):
    mode: Literal["implicit", "explicit"] | None = None
    ttl: Literal["30m"] | None = None


class ChatCompletionCreate(_Strict):
    """``POST /v1/chat/completions``: every parameter of OpenAI's, and Switchyard's ``priority``.

    An ``openai-compatible`` upstream receives the parameters exactly as sent. The simulator honours
    ``response_format``, ``stop``, ``tools``/``tool_choice``, ``max_completion_tokens``/``max_tokens``, ``seed``,
    ``logprobs``/``top_logprobs`` and vLLM's ``ignore_eos``/``min_tokens``; the others are accepted and have no
    effect on it (the README lists them).
    """

    model: str = Field(description="A model id from `GET /v1/models`.", examples=["meta-llama/Llama-3.1-8B-Instruct"])
    messages: list[Message] = Field(min_length=1, examples=[[{"role": "user", "content": "Hello"}]])
    tools: list[Tool] | None = Field(default=None, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    functions: list[LegacyFunction] | None = Field(
        default=None, max_length=128, description="Deprecated by OpenAI for `tools`."
    )
    function_call: Literal["none", "auto"] | NamedFunction | None = Field(
        default=None, description="Deprecated by OpenAI for `tool_choice`."
    )
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1, description="Deprecated by OpenAI; same as below.")
    max_completion_tokens: int | None = Field(default=None, ge=1)
    ignore_eos: bool | None = Field(
        default=None,
        description="vLLM's extension (the `openai` client sends it in `extra_body`): `true` makes the simulator's "
        "text exactly `max_tokens` long instead of the length it draws (benchmark clients send it to force lengths). "
        "Forwarded to `openai-compatible` upstreams.",
    )
    min_tokens: int | None = Field(
        default=None,
        ge=0,
        description="vLLM's extension (in `extra_body`): the simulator's text is at least this many tokens long, "
        "unless `max_tokens` cuts it. Forwarded to `openai-compatible` upstreams.",
    )
    temperature: float | None = Field(default=None, ge=0, le=2, description=_IGNORED)
    top_p: float | None = Field(default=None, ge=0, le=1, description=_IGNORED)
    seed: int | None = Field(default=None, description="The simulator's answer is a function of the seed.")
    n: int | None = Field(default=None, ge=1, le=1, description="Only 1 is supported: one choice per request.")
    stop: str | list[str] | None = Field(
        default=None, max_length=4, description="Up to 4 stop sequences: the answer ends before the first."
    )
    presence_penalty: float | None = Field(default=None, ge=-2, le=2, description=_IGNORED)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, description=_IGNORED)
    logit_bias: dict[str, float] | None = Field(default=None, description=_IGNORED)
    logprobs: bool | None = Field(
        default=None,
        description="`true`: `choices[].logprobs.content` holds every output token's log probability (in a stream, "
        "each chunk the logprobs of the tokens it holds); an `openai-compatible` upstream's are passed on exactly, "
        "the simulator's are synthetic (reproducible, but no language model's).",
    )
    top_logprobs: int | None = Field(
        default=None,
        ge=0,
        le=20,
        description="With `logprobs: true`: how many of the most likely tokens each output token lists in "
        "`top_logprobs`. Refused without `logprobs: true`.",
    )
    response_format: ResponseFormat | None = Field(
        default=None,
        description="`json_object`: the simulator answers a JSON object; `json_schema`: JSON valid against the "
        "schema (what `client.chat.completions.parse` sends).",
    )
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    modalities: list[Literal["text", "audio"]] | None = Field(
        default=None, description='Switchyard answers text only: `"audio"` is refused.'
    )
    audio: AudioOutput | None = None
    prediction: Prediction | None = None
    web_search_options: WebSearchOptions | None = None
    moderation: Moderation | None = None
    prompt_cache_key: str | None = Field(
        default=None,
        description="Keeps requests together on one replica of a simulated fleet (its prefix cache) while none holds "
        "the prompt's prefix yet; without it, `user`. Sent on to an `openai-compatible` upstream.",
    )
    prompt_cache_options: PromptCacheOptions | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    safety_identifier: str | None = None
    user: str | None = Field(default=None, max_length=256)
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority", "fast"] | None = None
    priority: Literal["batch", "standard", "interactive"] | None = Field(
        default=None, description="Switchyard: admission tier when the fleet is saturated (default standard)."
    )

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs_need_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("logprobs") is not True:
            raise ValueError("top_logprobs needs logprobs: true")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ChatCompletionCreate:
        if None not in (self.max_tokens, self.max_completion_tokens) and self.max_tokens != self.max_completion_tokens:
            raise ValueError("give max_completion_tokens or max_tokens, not two different values")
        if isinstance(self.tool_choice, NamedToolChoice | NamedCustomToolChoice):
            names = {t.function.name if isinstance(t, ToolDefinition) else t.custom.name for t in self.tools or ()}
            named = (
                self.tool_choice.function if isinstance(self.tool_choice, NamedToolChoice) else self.tool_choice.custom
            )
            if named.name not in names:
                raise ValueError(f"tool_choice names {named.name!r}, which is not in tools")
        if isinstance(self.function_call, NamedFunction) and self.function_call.name not in {
            f.name for f in self.functions or ()
        }:
            raise ValueError(f"function_call names {self.function_call.name!r}, which is not in functions")
        if self.modalities and "audio" in self.modalities:
            raise ValueError('modalities: Switchyard answers text only, "audio" cannot be produced')
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

    @property
    def stop_sequences(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def wire_messages(self) -> list[dict[str, Any]]:
        """The messages as the client sent them (fields it left out stay out)."""
        return [m.model_dump(mode="json", by_alias=True, exclude_unset=True) for m in self.messages]

    def wire_tools(self) -> list[dict[str, Any]]:
        return [t.model_dump(mode="json", by_alias=True, exclude_unset=True) for t in self.tools or ()]

    def wire_tool_choice(self) -> Any:
        if isinstance(self.tool_choice, BaseModel):
            return self.tool_choice.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return self.tool_choice

    def wire_response_format(self) -> dict[str, Any] | None:
        if self.response_format is None:
            return None
        return self.response_format.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @property
    def fleet_session(self) -> str | None:
        """What keeps the request on one replica of a simulated fleet while none caches its prompt's prefix yet:
        ``prompt_cache_key``, else ``user``."""
        return self.prompt_cache_key or self.user

    def forwarded_parameters(self) -> dict[str, Any]:
        """Every OpenAI parameter the client sent but ``model`` and ``messages``, exactly as sent (nothing
        defaulted): what an ``openai-compatible`` upstream receives. Switchyard's own fields are left out."""
        exclude = {"model", "messages", *SWITCHYARD_FIELDS}
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude=exclude)


class ModelPublic(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    backend: str
    instance_type: str
    context_window: int
    task: str = Field(
        description="What the model serves: `chat` (chat completions and responses) or `embeddings`.",
        examples=["chat", "embeddings"],
    )


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
    refusal: str | None = Field(default=None, description="The model's refusal (an upstream's), instead of `content`.")
    tool_calls: list[ToolCallOut] | None = Field(default=None, description="Present when the model called tools.")


class TopLogprob(BaseModel):
    token: str
    logprob: float = Field(le=0)
    bytes: list[int] | None = Field(description="The token's UTF-8 bytes.")


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = Field(description="The most likely tokens at this position (`top_logprobs`).")


class ChoiceLogprobs(BaseModel):
    """With ``logprobs: true``: the log probabilities of the answer's tokens."""

    content: list[TokenLogprob] | None = Field(description="One per token of `content`; `null` when there is none.")
    refusal: list[TokenLogprob] | None = Field(description="One per token of `refusal`; `null` when there is none.")


class CompletionChoice(BaseModel):
    index: int
    message: CompletionMessage
    logprobs: ChoiceLogprobs | None = Field(default=None, description="`null` unless `logprobs: true` was asked.")
    finish_reason: str = Field(description="`stop`, `length`, `tool_calls` or `cancelled`.")


class ComputeUsage(BaseModel):
    """Switchyard's addition to OpenAI's usage: the accelerator compute attributed to the request."""

    chip_us: int = Field(description="Chip-microseconds attributed to this request (what it is billed by).")
    instance_type: str = Field(examples=["trn2.48xlarge"])
    replica: str
    queue_ms: float
    ttft_ms: float = Field(description="Time to first token, simulated or measured.")
    decode_ms: float
    cache_saved_chip_us: int = Field(
        default=0,
        description="What computing the cached prompt tokens would have cost beyond reading them: the simulated "
        "fleet's estimate (it errs low), 0 when nothing was cached or an upstream does not say. Not billed.",
    )


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(
        description="Prompt tokens read from the serving replica's prefix cache instead of being computed (an "
        "`openai-compatible` upstream's own count when it reports one, else 0); `compute.chip_us` already reflects "
        "what they cost."
    )


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
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
    delta: dict[str, Any] = Field(description="`role`, `content`, `refusal` or `tool_calls` arriving with this chunk.")
    logprobs: ChoiceLogprobs | None = Field(
        default=None, description="With `logprobs: true`: the logprobs of the tokens this chunk's delta holds."
    )
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
