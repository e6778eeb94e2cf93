"""``POST /v1/vector_stores/{vector_store_id}/search``: HTTP only; the search is ``service.search_vector_stores``."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, post
from litestar.params import FromPath, JSONBody

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.deps import CurrentPrincipal, CurrentTenant
from switchyard.platform.http.errors import NotFound, RateLimited
from switchyard.platform.knowledge.search.schemas import SearchResult, SearchResultsPage, VectorStoreSearch
from switchyard.platform.knowledge.search.service import SearchDeps, search_vector_stores

__all__ = ["VectorStoreSearchController"]


class VectorStoreSearchController(Controller):
    path = "/v1/vector_stores"
    tags = ["Vector stores"]
    guards = [require_access]

    @post(
        "/{vector_store_id:str}/search",
        opt=access(Role.DEVELOPER),
        status_code=200,
        summary="Search a vector store",
        raises=[NotFound, BudgetExceeded, RateLimited],
    )
    async def search_vector_store(
        self,
        request: Request[Any, Any, Any],
        principal: CurrentPrincipal,
        tenant: CurrentTenant,
        vector_store_id: FromPath[str],
        data: JSONBody[VectorStoreSearch],
    ) -> SearchResultsPage:
        """The chunks of the store's files most relevant to the query: full-text and vector similarity fused
        (OpenAI-compatible). The query's embedding is billed as an embedding call is, to the key's tenant."""
        ranking = data.ranking_options
        hits = await search_vector_stores(
            SearchDeps.of_gateway(request.app.state.gateway),
            tenant,
            [vector_store_id],
            data.queries(),
            api_key_id=principal.key_id,
            max_num_results=data.max_num_results,
            filters=data.filters,
            score_threshold=ranking.score_threshold if ranking is not None else 0.0,
        )
        return SearchResultsPage(search_query=data.queries(), data=[SearchResult.of(hit) for hit in hits])
