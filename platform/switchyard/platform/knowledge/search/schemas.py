"""``POST /v1/vector_stores/{id}/search``: OpenAI's request and its ``vector_store.search_results.page`` answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.knowledge.search.service import MAX_NUM_RESULTS, MAX_QUERIES, MAX_QUERY_CHARS, SearchHit

__all__ = ["RankingOptions", "SearchResult", "SearchResultsPage", "TextContent", "VectorStoreSearch"]

QueryText = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]


class RankingOptions(BaseModel):
    model_config = REQUEST_BODY

    ranker: Literal["none", "auto", "default-2024-11-15"] = Field(
        default="auto", description="Accepted; Switchyard has no re-ranker, so every ranker fuses the same way."
    )
    score_threshold: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Keep results whose fused score (0 to 1) is at least this."
    )


class VectorStoreSearch(BaseModel):
    """OpenAI's search parameters."""

    model_config = REQUEST_BODY

    query: QueryText | Annotated[list[QueryText], Field(min_length=1, max_length=MAX_QUERIES)] = Field(
        description="A query, or several whose results are fused together.", examples=["How do refunds work?"]
    )
    filters: dict[str, Any] | None = Field(
        default=None,
        description="A filter on the files' `attributes`: a comparison `{type: eq|ne|gt|gte|lt|lte|in|nin, key, "
        "value}` or a compound `{type: and|or, filters: [...]}` (at most 4 deep, 64 filters).",
        examples=[{"type": "eq", "key": "region", "value": "eu"}],
    )
    max_num_results: int = Field(default=10, ge=1, le=MAX_NUM_RESULTS)
    ranking_options: RankingOptions | None = None
    rewrite_query: bool = Field(default=False, description="Accepted; the query is searched as it is sent.")

    def queries(self) -> list[str]:
        return [self.query] if isinstance(self.query, str) else list(self.query)


class TextContent(BaseModel):
    type: Literal["text"] = "text"
    text: str


class SearchResult(BaseModel):
    """One chunk found, as OpenAI's ``VectorStoreSearchResponse``, with where it is (Switchyard: for citations)."""

    file_id: str
    filename: str
    score: float = Field(description="Reciprocal-rank fusion of full-text and vector ranks, scaled to 0-1.")
    attributes: dict[str, str | float | bool] | None
    content: list[TextContent]
    vector_store_id: str
    position: int = Field(description="The chunk's index in its file.")
    char_start: int
    char_end: int

    @classmethod
    def of(cls, hit: SearchHit) -> SearchResult:
        return cls(
            file_id=hit.file_id,
            filename=hit.filename,
            score=hit.score,
            attributes=hit.attributes,
            content=[TextContent(text=hit.text)],
            vector_store_id=hit.vector_store_id,
            position=hit.position,
            char_start=hit.char_start,
            char_end=hit.char_end,
        )


class SearchResultsPage(BaseModel):
    object: Literal["vector_store.search_results.page"] = "vector_store.search_results.page"
    search_query: list[str] = Field(description="The queries searched (never rewritten).")
    data: list[SearchResult]
    has_more: bool = False
    next_page: str | None = None
