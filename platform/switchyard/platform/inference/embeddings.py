"""``POST /v1/embeddings`` (OpenAI wire format): vectors from an embedding model of the fleet, billed in chip-µs.

An embedding call is admitted and metered as a chat completion is (the one admission path, a usage event with its
prompt tokens and no completion tokens, ``usage.compute`` and ``x-switchyard-chip-us``); on the fleet each input
is one prefill-only pass. The simulator's vectors are deterministic: the same input to the same model always
gets the same unit vector, but similar texts do not get similar vectors (see ``switchyard.accelerator.pool``).
"""

from __future__ import annotations

import base64
import secrets
from typing import Annotated, Any, Literal

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
from switchyard.platform.inference.gateway import InferenceGateway
from switchyard.platform.inference.responses import compute_headers
from switchyard.platform.inference.schemas import ComputeUsage

__all__ = ["CreateEmbeddingResponse", "EmbeddingController", "EmbeddingCreate"]

MAX_INPUTS = 2048  # OpenAI's limit on the inputs of one call
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


def embedding_backend(gateway: InferenceGateway, body: EmbeddingCreate, tenant_id: str) -> Backend:
    """The deployment for ``body``: an embedding model the tenant may use (404, or 400 naming ``model``), which
    encodes every input (400 naming ``input``) at the asked ``dimensions`` (400 naming ``dimensions``)."""
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
        backend = embedding_backend(gateway, data, scope.tenant_id)
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
        body = embedding_list(
            model=backend.name, vectors=vectors, receipt=receipt, encoding_format=data.encoding_format
        )
        return Response(body, headers=admitted.headers | compute_headers(receipt))
