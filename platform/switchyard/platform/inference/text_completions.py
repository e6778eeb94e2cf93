"""``POST /v1/completions``: OpenAI's legacy text completions, run through the chat gateway.

Every choice (each prompt, ``n`` times) is the chat completion of one user message holding the prompt: admitted,
run on the pool and metered by ``InferenceGateway`` exactly as ``/v1/chat/completions`` is, with a usage event of its
own keyed by the completion id (``<id>-<index>`` for each choice when there are several). All choices are admitted
before any runs: a refusal gives back what the earlier ones hold, and nothing is billed.
"""

from __future__ import annotations

import secrets
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

from litestar import Controller, Request, Response, post
from litestar.params import JSONBody
from litestar.response import Stream

from switchyard.accelerator.pool import ComputeReceipt, TextDelta
from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.auth.principal import Principal
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.deps import CurrentPrincipal
from switchyard.platform.http.errors import ApiError, ErrorEnvelope, InvalidRequest, NotFound, RateLimited
from switchyard.platform.http.openapi import answers
from switchyard.platform.inference.completions import sse
from switchyard.platform.inference.gateway import Admitted, InferenceGateway, RequestEvents
from switchyard.platform.inference.schemas import ChatCompletionCreate
from switchyard.platform.inference.text_completion_answers import (
    ChoiceText,
    combined_usage,
    text_chunk,
    text_completion_object,
    wire_finish_reason,
)
from switchyard.platform.inference.text_completion_schemas import (
    DEFAULT_MAX_TOKENS,
    MAX_CHOICES,
    TextCompletion,
    TextCompletionChunk,
    TextCompletionCreate,
)

__all__ = ["TextCompletionController"]

_CHAT_FIELDS = ("stop", "temperature", "top_p", "presence_penalty", "frequency_penalty", "logit_bias", "user")


def _refuse_unserved(data: TextCompletionCreate) -> None:
    """400 naming ``echo``, ``suffix`` or ``best_of`` when the request asks for what they would change."""
    if data.echo:
        raise InvalidRequest("echo is not served: the answer holds the completion only", param="echo")
    if data.suffix:
        raise InvalidRequest("suffix is not served: insertion after the completion is not supported", param="suffix")
    if data.best_of is not None and data.best_of != (data.n or 1):
        raise InvalidRequest("best_of is not served: only best_of equal to n is accepted", param="best_of")


def _choice_seed(seed: int | None, prompt: str, j: int) -> int | None:
    """Choice ``j`` of a prompt: the request's seed plus ``j``; without a seed the first choice has none (the answer
    is the prompt's) and the others one drawn from the prompt, so that ``n`` choices differ reproducibly."""
    if seed is not None:
        return seed + j
    return None if j == 0 else zlib.crc32(f"{j}:{prompt}".encode())


def _chat_body(data: TextCompletionCreate, prompt: str, seed: int | None) -> ChatCompletionCreate:
    """The chat completion that answers one choice: the prompt as one user message, the sampling fields as sent."""
    body: dict[str, Any] = {
        "model": data.model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": data.max_tokens or DEFAULT_MAX_TOKENS,
        "stream": bool(data.stream),
    }
    body |= {name: getattr(data, name) for name in _CHAT_FIELDS if getattr(data, name) is not None}
    if seed is not None:
        body["seed"] = seed
    if data.logprobs is not None:
        body |= {"logprobs": True, "top_logprobs": data.logprobs}
    if data.priority is not None:
        body["priority"] = data.priority
    return ChatCompletionCreate.model_validate(body)


def _as_prompt_error(exc: ApiError) -> ApiError:
    """A chat refusal that names the messages names the prompt instead: the client sent no messages."""
    if exc.param == "messages":
        exc.param = "prompt"
        exc.message = exc.message.replace("the messages", "the prompt")
    return exc


async def _admit_choices(
    gateway: InferenceGateway, principal: Principal, data: TextCompletionCreate, completion_id: str
) -> list[Admitted]:
    """Every choice admitted as a chat completion, in index order; on a refusal the earlier ones are given back."""
    prompts = data.prompt_texts()
    n = data.n or 1
    if len(prompts) * n > MAX_CHOICES:
        raise InvalidRequest(
            f"{len(prompts)} prompts × n={n} asks for more than {MAX_CHOICES} choices", param="n", code="invalid_value"
        )
    admitted: list[Admitted] = []
    try:
        for index, (prompt, j) in enumerate((p, j) for p in prompts for j in range(n)):
            request_id = completion_id if len(prompts) * n == 1 else f"{completion_id}-{index}"
            body = _chat_body(data, prompt, _choice_seed(data.seed, prompt, j))
            admitted.append(await gateway.admit(principal=principal, body=body, request_id=request_id))
    except ApiError as exc:
        await _give_back(gateway, admitted)
        raise _as_prompt_error(exc) from None
    except BaseException:
        await _give_back(gateway, admitted)
        raise
    return admitted


async def _give_back(gateway: InferenceGateway, admitted: list[Admitted]) -> None:
    for choice in admitted:
        await gateway.admission.finish(choice.holds, billed=False)


def _headers(admitted: list[Admitted], receipts: list[ComputeReceipt]) -> dict[str, str]:
    chip_us = sum(r.chip_us for r in receipts)
    compute = {"x-switchyard-chip-us": str(chip_us), "x-switchyard-instance-type": receipts[0].instance_type}
    return admitted[-1].headers | compute


class TextCompletionController(Controller):
    path = "/v1/completions"
    tags = ["Inference"]
    guards = [require_access]

    @post(
        opt=access(Role.DEVELOPER),
        summary="Create a text completion",
        status_code=200,
        raises=[NotFound, BudgetExceeded, RateLimited],
        responses=answers(
            200,
            "The completion; with `stream: true` its chunks as server-sent events, ending with `[DONE]`.",
            {"application/json": TextCompletion, "text/event-stream": TextCompletionChunk | ErrorEnvelope},
        ),
    )
    async def create_completion(
        self, request: Request[Any, Any, Any], principal: CurrentPrincipal, data: JSONBody[TextCompletionCreate]
    ) -> Response[Any]:
        """Complete one or more prompts (OpenAI's legacy completions API; `stream: true` answers with server-sent
        events).

        Each choice runs as a chat completion of one user message holding the prompt, and is admitted, metered and
        billed as one; `usage` adds up the choices'. `echo`, `suffix` and `best_of` other than `n` are refused.
        """
        _refuse_unserved(data)
        gateway: InferenceGateway = request.app.state.gateway
        completion_id = f"cmpl-{secrets.token_hex(12)}"
        admitted = await _admit_choices(gateway, principal, data, completion_id)
        runs = [gateway.run(choice) for choice in admitted]
        created = int(time.time())
        model = admitted[0].backend.name
        logprobs = data.logprobs is not None
        if data.stream:
            include_usage = bool(data.stream_options and data.stream_options.include_usage)
            stream = _stream(gateway, admitted, runs, completion_id, created, include_usage, logprobs)
            return Stream(
                stream, media_type="text/event-stream", headers=admitted[-1].headers | {"cache-control": "no-cache"}
            )
        choices: list[ChoiceText] = []
        receipts: list[ComputeReceipt] = []
        for index, events in enumerate(runs):
            choice = ChoiceText(index, logprobs)
            async for event in events:
                if isinstance(event, TextDelta):
                    choice.add(event)
                elif isinstance(event, ComputeReceipt):
                    choice.finish_reason = wire_finish_reason(event.finish_reason)
                    receipts.append(event)
            choices.append(choice)
        body = text_completion_object(
            completion_id=completion_id, created=created, model=model, choices=choices, receipts=receipts
        )
        return Response(body, headers=_headers(admitted, receipts))


async def _stream(
    gateway: InferenceGateway,
    admitted: list[Admitted],
    runs: list[RequestEvents],
    completion_id: str,
    created: int,
    include_usage: bool,
    logprobs: bool,
) -> AsyncIterator[bytes]:
    """Each choice's chunks, choice after choice (all run at once), then the usage; a client that goes away
    cancels every choice still running (what each used is still metered once)."""
    model = admitted[0].backend.name
    receipts: list[ComputeReceipt] = []
    finished = False
    try:
        for index, events in enumerate(runs):
            choice = ChoiceText(index, logprobs)
            async for event in events:
                if isinstance(event, TextDelta):
                    yield sse(text_chunk(completion_id, created, model, choice.chunk_choice(event)))
                elif isinstance(event, ComputeReceipt):
                    receipts.append(event)
                    ending = choice.ending(wire_finish_reason(event.finish_reason))
                    yield sse(text_chunk(completion_id, created, model, ending))
        if include_usage:
            yield sse(text_chunk(completion_id, created, model, None, combined_usage(receipts)))
        finished = True
    except ApiError as exc:
        finished = True
        yield sse({"error": {"message": exc.message, "type": exc.error_type, "param": exc.param, "code": exc.code}})
    finally:
        if not finished:  # the client disconnected mid-stream
            for running in admitted:
                gateway.cancel(running)
    yield sse("[DONE]")
