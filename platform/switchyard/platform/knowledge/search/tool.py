"""The searcher behind an agent's ``file_search`` tool: the tenant's vector stores, searched as
``POST /v1/vector_stores/{id}/search`` searches them (the query embedded and billed to the tenant and the run's API
key), its hits as the tool gives them to the model. A search refused (a store that is not the tenant's, a rate or a
budget) is the tool call's error, which the model reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from switchyard.accelerator.pool import AcceleratorPool
from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.tools import FileSearcher, FileSearchHit
from switchyard.platform.admission import Admission
from switchyard.platform.db import Database, TenantScope
from switchyard.platform.http.errors import ApiError
from switchyard.platform.inference.gateway import InferenceGateway
from switchyard.platform.knowledge.search.embedding import GatewayEmbedder
from switchyard.platform.knowledge.search.service import SearchDeps, search_vector_stores

__all__ = ["file_searcher"]


def file_searcher(
    *, database: Database, pool: AcceleratorPool, admission: Admission, scope: TenantScope, api_key_id: str | None
) -> FileSearcher:
    """Searches ``scope``'s vector stores on behalf of ``api_key_id`` (``None``: the tenant alone). Its gateway is
    made at the first search: most jobs resolve a searcher and never search."""
    made: list[SearchDeps] = []

    def deps() -> SearchDeps:
        if not made:
            gateway = InferenceGateway(pool=pool, database=database, settings=admission.settings, admission=admission)
            made.append(SearchDeps(database=database, embed=GatewayEmbedder(gateway)))
        return made[0]

    async def search(
        vector_store_ids: Sequence[str],
        query: str,
        *,
        max_num_results: int,
        filters: Mapping[str, Any] | None,
        score_threshold: float,
    ) -> list[FileSearchHit]:
        try:
            hits = await search_vector_stores(
                deps(),
                scope,
                vector_store_ids,
                query,
                api_key_id=api_key_id,
                max_num_results=max_num_results,
                filters=filters,
                score_threshold=score_threshold,
            )
        except ApiError as refused:
            raise ToolExecutionError(f"the search was refused: {refused.message}") from None
        return [
            FileSearchHit(file_id=h.file_id, filename=h.filename, score=h.score, text=h.text, attributes=h.attributes)
            for h in hits
        ]

    return search
