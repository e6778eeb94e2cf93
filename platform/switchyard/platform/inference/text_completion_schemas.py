"""OpenAI's legacy text-completions wire format (``POST /v1/completions``): what clients send, what Switchyard answers.

The request declares every parameter of OpenAI's ``completions.create`` (as the ``openai`` package types it), so the
clients still on this API (``langchain_openai.OpenAI``, ``litellm.text_completion``, llama-index's ``OpenAILike``)
are accepted; unknown fields are refused. ``echo``, ``suffix`` and ``best_of`` (past ``n``) are not served: they are
refused by name rather than ignored, since each changes what the answer holds.

A prompt of token ids is represented as text that the one tokenizer approximation (``pool.tokens``) counts as
exactly one token per id: each id written in base 36 after a space (``" 1z"``), at most four characters, so ids up to
``MAX_TOKEN_ID``. The answer models document the wire format (``inference.text_completions`` builds the answers as
dicts); the OpenAPI test checks real answers against them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.inference.schemas import CompletionUsage, StreamOptions

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MAX_CHOICES",
    "MAX_TOKEN_ID",
    "TextCompletion",
    "TextCompletionChunk",
    "TextCompletionCreate",
]

DEFAULT_MAX_TOKENS = 16
"""OpenAI's default ``max_tokens`` for this API (chat has none)."""
MAX_TOKEN_ID = 36**4 - 1
"""The largest token id a prompt may hold: four base-36 digits, one token of the approximation."""
MAX_CHOICES = 128
"""The most choices one request asks for (prompts × ``n``): each is admitted, run and billed as one model call."""
MAX_LOGPROBS = 5
_IGNORED = "Forwarded to `openai-compatible` upstreams; the simulator ignores it."

TokenId = Annotated[int, Field(ge=0, le=MAX_TOKEN_ID)]
TokenIds = Annotated[list[TokenId], Field(min_length=1)]
Prompt = str | Annotated[list[str], Field(min_length=1)] | TokenIds | Annotated[list[TokenIds], Field(min_length=1)]


class TextCompletionCreate(BaseModel):
    """``POST /v1/completions``: every parameter of OpenAI's, and Switchyard's ``priority``.

    Each prompt runs as a chat completion of one user message (counted as such: its text plus the few tokens a
    message adds), ``n`` times; every choice is admitted, metered and billed as one chat completion is.
    """

    model_config = REQUEST_BODY

    model: str = Field(description="A model id from `GET /v1/models`.", examples=["meta-llama/Llama-3.1-8B-Instruct"])
    prompt: Prompt = Field(
        description="A text, a list of texts, a list of token ids or a list of such lists: each prompt of a list "
        "gets `n` choices of its own (choice `index` = prompt position × `n` + j).",
        examples=["Say this is a test"],
    )
    max_tokens: int | None = Field(
        default=DEFAULT_MAX_TOKENS, ge=1, description="The most tokens each choice writes (default 16, as OpenAI's)."
    )
    n: int | None = Field(default=None, ge=1, le=MAX_CHOICES, description="Choices per prompt (default 1).")
    best_of: int | None = Field(
        default=None, ge=1, le=MAX_CHOICES, description="Not served: only `best_of` equal to `n` (or 1) is accepted."
    )
    echo: bool | None = Field(default=None, description="Not served: only `false` is accepted.")
    suffix: str | None = Field(default=None, description="Not served: only `null` or an empty text is accepted.")
    stop: str | list[str] | None = Field(
        default=None, max_length=4, description="Up to 4 stop sequences: each choice ends before the first."
    )
    seed: int | None = Field(
        default=None, description="The simulator's answer is a function of the seed (choice j of a prompt: seed + j)."
    )
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    logprobs: int | None = Field(
        default=None,
        ge=0,
        le=MAX_LOGPROBS,
        description="Each choice's tokens with their log probabilities and this many most likely alternatives "
        "(`choices[].logprobs`: `tokens`, `token_logprobs`, `top_logprobs`, `text_offset`); the simulator's are "
        "synthetic.",
    )
    temperature: float | None = Field(default=None, ge=0, le=2, description=_IGNORED)
    top_p: float | None = Field(default=None, ge=0, le=1, description=_IGNORED)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2, description=_IGNORED)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, description=_IGNORED)
    logit_bias: dict[str, float] | None = Field(default=None, description=_IGNORED)
    user: str | None = Field(default=None, max_length=256)
    priority: Literal["batch", "standard", "interactive"] | None = Field(
        default=None, description="Switchyard: admission tier when the fleet is saturated (default standard)."
    )

    def prompt_texts(self) -> list[str]:
        """Every prompt of the request as text, in order (token ids as ``token_ids_text`` writes them)."""
        prompt: Any = self.prompt
        if isinstance(prompt, str):
            return [prompt]
        if isinstance(prompt[0], int):
            return [token_ids_text(prompt)]
        return [item if isinstance(item, str) else token_ids_text(item) for item in prompt]


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = _DIGITS[digit] + digits
        if number == 0:
            return digits


def token_ids_text(token_ids: list[int]) -> str:
    """Token ids as text of exactly as many tokens: each id in base 36 after a space (a word of at most four
    characters is one token of the approximation)."""
    return "".join(f" {_base36(token_id)}" for token_id in token_ids)


class TextLogprobs(BaseModel):
    """With ``logprobs``: the choice's tokens, each one's log probability and its most likely alternatives."""

    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]] = Field(description="Per token: up to `logprobs` alternatives, by token.")
    text_offset: list[int] = Field(description="Per token: where it starts in the choice's text (characters).")


class TextChoice(BaseModel):
    index: int
    text: str
    logprobs: TextLogprobs | None = Field(default=None, description="`null` unless `logprobs` was asked.")
    finish_reason: str | None = Field(description="`stop` or `length`; `null` in a stream until the choice ends.")


class TextCompletion(BaseModel):
    """``POST /v1/completions`` without ``stream``: OpenAI's ``text_completion`` with ``usage.compute`` (the sum of
    its choices': chip-microseconds added up, timings of the slowest)."""

    id: str = Field(examples=["cmpl-0123456789abcdef01234567"])
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(description="Unix seconds.")
    model: str
    system_fingerprint: str
    choices: list[TextChoice]
    usage: CompletionUsage


class TextCompletionChunk(BaseModel):
    """One server-sent event of a streamed text completion (``data: {...}``); the stream ends with ``data: [DONE]``.

    Each choice's text arrives in chunks, choice after choice; its last chunk has a ``finish_reason``. With
    ``stream_options.include_usage`` one more chunk follows with no choices and the ``usage``. An error after the
    stream started arrives as ``data: {"error": ...}``.
    """

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str
    choices: list[TextChoice]
    usage: CompletionUsage | None = None
