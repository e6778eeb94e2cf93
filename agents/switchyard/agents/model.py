"""The model interface the run loop calls, and deterministic models for tests.

The platform implements :class:`Model` on top of the accelerator pool: it turns a :class:`ModelRequest`
into an ``InferenceRequest``, streams the tokens, and answers with the assistant message, the token usage
and the chip-microseconds of the request's ``ComputeReceipt``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from switchyard.agents.messages import Message, ToolCall, Usage
from switchyard.agents.spec import ModelParams

__all__ = ["FunctionModel", "Model", "ModelRequest", "ModelResponse", "TestModel", "default_token_counter"]


class ModelRequest(BaseModel):
    """One model call: the assembled context, the tools on offer and the sampling parameters."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    model: str
    messages: tuple[Message, ...]
    request_id: str = Field(default="", description="the step id: stable when a call is repeated after a crash")
    agent: str | None = Field(default=None, description="the agent acting after a handoff (None: the run's own)")
    tools: tuple[dict[str, Any], ...] = Field(default=(), description="OpenAI-style tools[] entries")
    params: ModelParams = Field(default_factory=ModelParams)
    output_ceiling: int | None = Field(
        default=None,
        description="the most output tokens the answer may have whatever params ask (what the platform's budget "
        "hold covers): the model cuts the answer there; unlike params.max_tokens never a length to aim for",
    )
    compute_ceiling_chip_us: int | None = Field(
        default=None,
        description="the most compute the answer may bill (what the platform's budget hold covers): a model that "
        "bills measured time stops the answer there, finish_reason length",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="further chat-completions fields of every call, e.g. response_format, tool_choice, "
        "parallel_tool_calls (a Responses request's text.format and tool settings)",
    )

    def to_openai(self) -> dict[str, Any]:
        """The body of an OpenAI chat-completions request for this call."""
        body: dict[str, Any] = {"model": self.model, "messages": [m.to_openai() for m in self.messages]}
        if self.tools:
            body["tools"] = list(self.tools)
        body.update(self.params.model_dump(exclude_none=True))
        body.update(self.options)
        return body


class ModelResponse(BaseModel):
    """What a model call produced, with the compute it used (``chip_us`` from the ComputeReceipt)."""

    message: Message
    usage: Usage = Field(default_factory=Usage)
    chip_us: int = Field(default=0, ge=0)
    cache_saved_chip_us: int = Field(default=0, ge=0, description="what its cached prompt tokens did not cost")
    finish_reason: str = "stop"
    receipt_id: str | None = Field(default=None, description="the accelerator pool's request/receipt id")
    ttft_ms: float | None = Field(default=None, description="time to first token, from the receipt")
    replica: str | None = Field(default=None, description="the replica that served the call, from the receipt")


@runtime_checkable
class Model(Protocol):
    """A chat model with tool calling. Implementations may take as long as they like; the loop waits."""

    async def request(self, request: ModelRequest) -> ModelResponse: ...


def default_token_counter(text: str) -> int:
    """A tokenizer-free estimate: one token per four characters, rounded up."""
    return (len(text) + 3) // 4


ModelFunction = Callable[[ModelRequest], "ModelResponse | Message | str | Awaitable[ModelResponse | Message | str]"]


class FunctionModel:
    """A model whose answers come from a Python function (like pydantic-ai's ``FunctionModel``).

    The function receives the :class:`ModelRequest` and returns a :class:`ModelResponse`, a
    :class:`Message` or a plain string (a final answer). Usage is estimated with the token counter when
    the function does not give it; ``chip_us_per_token`` fakes compute for billing tests.
    """

    def __init__(
        self,
        function: ModelFunction,
        *,
        token_counter: Callable[[str], int] = default_token_counter,
        chip_us_per_token: int = 0,
    ) -> None:
        self._function = function
        self._count = token_counter
        self._chip_us_per_token = chip_us_per_token
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        answer = self._function(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, ModelResponse):
            return answer
        message = Message.assistant(answer) if isinstance(answer, str) else answer
        usage = Usage(
            input_tokens=sum(self._count(json.dumps(m.to_openai())) for m in request.messages),
            output_tokens=self._count(json.dumps(message.to_openai())),
        )
        return ModelResponse(
            message=message,
            usage=usage,
            chip_us=usage.total_tokens * self._chip_us_per_token,
            finish_reason="tool_calls" if message.tool_calls else "stop",
        )


class TestModel(FunctionModel):
    """Calls every offered tool once with arguments built from its schema, then answers with the results.

    Deterministic: call ids are ``call_<n>_<tool>``; the final answer is a JSON object of tool outputs by
    tool name (or ``final_text`` when given, or ``"ok"`` when there are no tools).
    """

    __test__ = False  # not a pytest test class

    def __init__(self, *, final_text: str | None = None, call_tools: list[str] | None = None, **kwargs: Any) -> None:
        self._final_text = final_text
        self._call_tools = call_tools
        super().__init__(self._answer, **kwargs)

    def _answer(self, request: ModelRequest) -> Message:
        results = {m.tool_call_id: m.content for m in request.messages if m.role == "tool"}
        if not results:
            calls = []
            for index, tool in enumerate(request.tools):
                function = tool["function"]
                if self._call_tools is not None and function["name"] not in self._call_tools:
                    continue
                arguments = _example_for(function.get("parameters") or {})
                calls.append(
                    ToolCall(
                        id=f"call_{index}_{function['name']}", name=function["name"], arguments=json.dumps(arguments)
                    )
                )
            if calls:
                return Message.assistant(None, calls)
        if self._final_text is not None:
            return Message.assistant(self._final_text)
        if not results:
            return Message.assistant("ok")
        names = {c.id: c.name for m in request.messages for c in m.tool_calls}
        by_name = {names.get(k or "", k or ""): v for k, v in results.items()}
        return Message.assistant(json.dumps(by_name, sort_keys=True))


def _example_for(schema: dict[str, Any]) -> Any:
    """A small value matching ``schema`` (first enum value, first example, or a typed placeholder)."""
    if schema.get("examples"):
        return schema["examples"][0]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {key: _example_for(props[key]) for key in schema.get("required", []) if key in props}
    if kind == "array":
        return []
    if kind == "integer":
        return 0
    if kind == "number":
        return 0.0
    if kind == "boolean":
        return False
    return "a"
