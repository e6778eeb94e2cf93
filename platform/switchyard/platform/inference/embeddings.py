"""``POST /v1/embeddings`` (OpenAI wire format): vectors from an embedding model of the fleet, billed in chip-µs.

An embedding call is admitted and metered as a chat completion is (the one admission path, a usage event with its
prompt tokens and no completion tokens, ``usage.compute`` and ``x-switchyard-chip-us``); on the fleet each input
is one prefill-only pass. The simulator's vectors are deterministic: the same input to the same model always
gets the same unit vector, but similar texts do not get similar vectors (see ``switchyard.accelerator.pool``).

An answer is bounded before anything runs: inputs x dimensions x bytes a value (``VALUE_BYTES``) plus each item's
wrapper must fit ``SWITCHYARD_MAX_EMBEDDINGS_ANSWER_BYTES``, else the call is refused with 400 naming ``input``
(``answer_too_large``); the answer is encoded off the event loop, so another tenant's requests on the process go on
while it is. An ``openai-compatible`` deployment's dimensions are known only when the call names them.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
from litestar import Controller, Request, Response, post
from litestar.params import JSONBody
from pydantic import BaseModel, Field

from switchyard.accelerator.pool import (
    EMBEDDING_SHAPES,
    Backend,
    ComputeReceipt,
    EmbeddingInput,
    EmbeddingRequest,
    Embeddings,
    Priority,
    input_tokens,
)
from switchyard.platform.admission import model_backend
from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.deps import CurrentPrincipal
from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.http.errors import InvalidRequest, NotFound, RateLimited, ServiceUnavailable
from switchyard.platform.http.openapi import answers
from switchyard.platform.inference.completions import compute_headers
from switchyard.platform.inference.gateway import InferenceGateway
from switchyard.platform.inference.schemas import ComputeUsage

__all__ = ["VALUE_BYTES", "CreateEmbeddingResponse", "EmbeddingController", "EmbeddingCreate", "answer_bytes"]

MAX_INPUTS = 2048  # OpenAI's limit on the inputs of one call
VALUE_BYTES = {"float": 24.0, "base64": 16 / 3}
"""Bytes of one vector value in an answer: a JSON float with its comma at most (a float32 written as a double,
``-0.00012345678901234567,``; 21.5 on average), or four bytes of base64 (16/3 characters)."""
ITEM_BYTES = 64  # {"object":"embedding","index":2047,"embedding":[...]}, around each vector
LIST_BYTES = 1024  # the list, the model's name and the usage around all of them
_PRIORITIES = {"batch": Priority.BATCH, "standard": Priority.STANDARD, "interactive": Priority.INTERACTIVE}

Text = Annotated[str, Field(min_length=1)]
TokenIds = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]


class EmbeddingCreate(BaseModel):
    """``POST /v1/embeddings``: OpenAI's parameters, plus Switchyard's ``priority``."""

    model_config = REQUEST_BODY

    input: (
        Text
        | Annotated[list[Text], Field(min_length=1, max_length=MAX_INPUTS)]
        | TokenIds
        | Annotated[list[TokenIds], Field(min_length=1, max_length=MAX_INPUTS)]
    ) = Field(
        description="A text, an array of texts, an array of token ids, or an array of token-id arrays; "
        "each becomes one vector, in order. No input may be empty or longer than the model encodes.",
        examples=["The food was delicious and the waiter was kind."],
    )
    model: str = Field(description="An embedding model id from `GET /v1/models`.", examples=["BAAI/bge-large-en-v1.5"])
    encoding_format: Literal["float", "base64"] = Field(
        default="float", description="`base64`: each vector as the base64 of its little-endian float32 values."
    )
    dimensions: int | None = Field(
        default=None, ge=1, description="Shorter vectors, for models trained to cut them (Qwen3-Embedding: 32-4096)."
    )
    user: str | None = Field(default=None, max_length=256)
    priority: Literal["batch", "standard", "interactive"] | None = Field(
        default=None, description="Switchyard: admission tier when the fleet is saturated (default standard)."
    )

    def inputs(self) -> tuple[EmbeddingInput, ...]:
        """The inputs as a tuple of texts or token-id tuples."""
        raw = self.input
        if isinstance(raw, str):
            return (raw,)
        if isinstance(raw[0], int):  # one input as token ids
            return (tuple(token for token in raw if isinstance(token, int)),)
        return tuple(item if isinstance(item, str) else tuple(item) for item in raw if not isinstance(item, int))


class EmbeddingObject(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(description="Floats, or a base64 string with `encoding_format: base64`.")


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int
    compute: ComputeUsage


class CreateEmbeddingResponse(BaseModel):
    """OpenAI's embedding list with ``usage.compute``: the chip-µs of the call's encoder passes."""

    object: Literal["list"] = "list"
    data: list[EmbeddingObject]
    model: str
    usage: EmbeddingUsage


def answer_bytes(inputs: int, dimensions: int, encoding_format: str) -> int:
    """The most bytes an answer of ``inputs`` vectors of ``dimensions`` values may take in ``encoding_format``."""
    return int(inputs * (dimensions * VALUE_BYTES[encoding_format] + ITEM_BYTES)) + LIST_BYTES


def refuse_huge_answer(body: EmbeddingCreate, dimensions: int | None, max_answer_bytes: int) -> None:
    """400 naming ``input`` (``answer_too_large``) when the answer to ``body`` could pass ``max_answer_bytes``
    (``dimensions``: the vectors' length, ``None`` when the deployment does not say)."""
    if dimensions is None:
        return
    inputs = len(body.inputs())
    size = answer_bytes(inputs, dimensions, body.encoding_format)
    if size <= max_answer_bytes:
        return
    fits = max(0, int((max_answer_bytes - LIST_BYTES) / (dimensions * VALUE_BYTES[body.encoding_format] + ITEM_BYTES)))
    raise InvalidRequest(
        f"{inputs} inputs x {dimensions} dimensions as {body.encoding_format} make an answer of up to {size:,} bytes; "
        f"one call may answer at most {max_answer_bytes:,} (SWITCHYARD_MAX_EMBEDDINGS_ANSWER_BYTES): send at most "
        f"{fits} inputs a call, fewer dimensions, or encoding_format base64",
        param="input",
        code="answer_too_large",
    )


def embedding_backend(
    gateway: InferenceGateway, body: EmbeddingCreate, tenant_id: str, *, max_answer_bytes: int
) -> Backend:
    """The deployment for ``body``: an embedding model the tenant may use (404, or 400 naming ``model``), which
    encodes every input (400 naming ``input``) at the asked ``dimensions`` (400 naming ``dimensions``), in an
    answer of at most ``max_answer_bytes`` (400 naming ``input``)."""
    backend = model_backend(gateway.pool, body.model, tenant_id, task="embeddings")
    shape = EMBEDDING_SHAPES.get(backend.spec.model) if backend.spec.backend == "trainium-sim" else None
    if body.dimensions is not None and shape is not None:
        if shape.min_dimensions == shape.dimensions and body.dimensions != shape.dimensions:
            raise InvalidRequest(
                f"{body.model} answers {shape.dimensions}-dimensional vectors and cannot shorten them",
                param="dimensions",
                code="invalid_value",
            )
        if not shape.min_dimensions <= body.dimensions <= shape.dimensions:
            raise InvalidRequest(
                f"{body.model} answers {shape.min_dimensions} to {shape.dimensions} dimensions",
                param="dimensions",
                code="invalid_value",
            )
    refuse_huge_answer(body, body.dimensions or (shape.dimensions if shape is not None else None), max_answer_bytes)
    limit = shape.max_input_tokens if shape is not None else backend.context_window
    for index, tokens in enumerate(input_tokens(body.inputs())):
        if tokens > limit:
            raise InvalidRequest(
                f"input[{index}] has {tokens} tokens; {body.model} encodes at most {limit} per input",
                param="input",
                code="context_length_exceeded",
            )
    return backend


def _wire_vector(vector: tuple[float, ...], encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
    return list(vector)


def embedding_list(*, model: str, vectors: Embeddings, receipt: ComputeReceipt, encoding_format: str) -> dict[str, Any]:
    """The answer exactly as OpenAI spells it, with ``usage.compute``."""
    usage = receipt.usage()
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": index, "embedding": _wire_vector(vector, encoding_format)}
            for index, vector in enumerate(vectors.vectors)
        ],
        "model": model,
        "usage": {
            "prompt_tokens": usage["prompt_tokens"],
            "total_tokens": usage["total_tokens"],
            "compute": usage["compute"],
        },
    }


class EmbeddingController(Controller):
    path = "/v1/embeddings"
    tags = ["Inference"]
    guards = [require_access]

    @post(
        opt=access(Role.DEVELOPER),
        summary="Create embeddings",
        status_code=200,
        raises=[NotFound, BudgetExceeded, RateLimited],
        responses=answers(200, "One vector per input, in order.", {"application/json": CreateEmbeddingResponse}),
    )
    async def create_embeddings(
        self, request: Request[Any, Any, Any], principal: CurrentPrincipal, data: JSONBody[EmbeddingCreate]
    ) -> Response[Any]:
        """Embed texts or token ids with an embedding model of the fleet (OpenAI-compatible).

        Each input is one encoder pass (prefill, no decode) on the model's replicas; `usage.compute` reports the
        chip-microseconds attributed to the call, which it is billed by. The simulator's vectors are unit length
        and deterministic (the same input always gets the same vector) but carry no meaning.
        """
        gateway: InferenceGateway = request.app.state.gateway
        scope = principal.scope
        assert scope is not None  # the route's guard admits tenant keys only
        max_answer_bytes = request.app.state.settings.max_embeddings_answer_bytes
        backend = embedding_backend(gateway, data, scope.tenant_id, max_answer_bytes=max_answer_bytes)
        call = EmbeddingRequest(
            request_id=f"emb-{secrets.token_hex(12)}",  # ours: it keys the call's one usage event
            tenant=scope.tenant_id,
            model=backend.name,
            inputs=data.inputs(),
            dimensions=data.dimensions,
            priority=_PRIORITIES[data.priority or "standard"],
            user=data.user,
        )
        admitted = await gateway.admit_embeddings(principal=principal, backend=backend, request=call)
        vectors: Embeddings | None = None
        receipt: ComputeReceipt | None = None
        async for event in gateway.run(admitted):
            if isinstance(event, Embeddings):
                vectors = event
            elif isinstance(event, ComputeReceipt):
                receipt = event
        assert receipt is not None  # the events end with the receipt, or raise
        if vectors is None:  # the fleet stopped the call (it is shutting down): what it used is on its receipt
            raise ServiceUnavailable("the fleet stopped the call before its vectors were ready", code="cancelled")
        # encoded in a thread: up to SWITCHYARD_MAX_EMBEDDINGS_ANSWER_BYTES of JSON, while the loop serves others
        content = await asyncio.to_thread(_encoded_answer, backend.name, vectors, receipt, data.encoding_format)
        return Response(content, media_type="application/json", headers=admitted.headers | compute_headers(receipt))


def _encoded_answer(model: str, vectors: Embeddings, receipt: ComputeReceipt, encoding_format: str) -> bytes:
    answer = embedding_list(model=model, vectors=vectors, receipt=receipt, encoding_format=encoding_format)
    return msgspec.json.encode(answer)
