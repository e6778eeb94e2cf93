"""A search's query embedded as ``/v1/embeddings`` embeds: the same checks, admission, pool call and metering.

:class:`GatewayEmbedder` goes through the gateway's own steps (``embedding_backend``, ``admit_embeddings``, ``run``):
the query is one embedding call of the store's model at the store's dimensions, admitted under the tenant's rates
and budgets, and billed to the tenant and the API key as one usage event (its prompt tokens, no output) before the
search answers. Anything else that embeds (a worker's tool, a test) implements :class:`QueryEmbedder`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt

from switchyard.accelerator.pool import ComputeReceipt, EmbeddingRequest, Embeddings
from switchyard.platform.auth.principal import Principal
from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import InvalidRequest, ServiceUnavailable
from switchyard.platform.inference.embeddings import EmbeddingCreate, embedding_backend
from switchyard.platform.inference.gateway import InferenceGateway

__all__ = ["GatewayEmbedder", "QueryEmbedder"]


class QueryEmbedder(Protocol):
    """Embeds a search's queries with a store's model at its dimensions, on the tenant's (and key's) account."""

    async def __call__(
        self, scope: TenantScope, *, api_key_id: str | None, model: str, dimensions: int, texts: Sequence[str]
    ) -> list[npt.NDArray[np.float32]]: ...


@dataclass(frozen=True)
class GatewayEmbedder:
    """The /v1/embeddings path of an API process's gateway (or one a worker builds over its pool and admission)."""

    gateway: InferenceGateway

    async def __call__(
        self, scope: TenantScope, *, api_key_id: str | None, model: str, dimensions: int, texts: Sequence[str]
    ) -> list[npt.NDArray[np.float32]]:
        body = EmbeddingCreate(input=list(texts), model=model, dimensions=dimensions)
        try:
            backend = embedding_backend(
                self.gateway,
                body,
                scope.tenant_id,
                max_answer_bytes=self.gateway.settings.max_embeddings_answer_bytes,
            )
        except InvalidRequest as refused:  # the query is what the caller sent as the embedding's input
            if refused.param != "input":
                raise
            raise InvalidRequest(refused.message, param="query", code=refused.code) from None
        call = EmbeddingRequest(
            request_id=f"vss-{secrets.token_hex(12)}",  # keys the call's one usage event
            tenant=scope.tenant_id,
            model=backend.name,
            inputs=body.inputs(),
            dimensions=dimensions,
        )
        # a key-less caller (a run started without a key) is billed to the tenant alone: the usage event and the
        # admission both take a key id of None; only Principal's annotation says str
        principal = Principal(key_id=cast(str, api_key_id), scope=scope, role=None)
        admitted = await self.gateway.admit_embeddings(principal=principal, backend=backend, request=call)
        vectors: Embeddings | None = None
        receipt: ComputeReceipt | None = None
        async for event in self.gateway.run(admitted):
            if isinstance(event, Embeddings):
                vectors = event
            elif isinstance(event, ComputeReceipt):
                receipt = event
        if vectors is None or receipt is None:  # the fleet stopped the call (it is shutting down)
            raise ServiceUnavailable("the fleet stopped the query's embedding before it was ready", code="cancelled")
        return [np.asarray(vector, dtype=np.float32) for vector in vectors.vectors]
