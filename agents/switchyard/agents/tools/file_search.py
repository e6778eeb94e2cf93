"""The ``file_search`` tool: the model searches the tenant's vector stores and reads the best chunks.

The search itself is the platform's (hybrid full-text and vector retrieval over the stores' chunks, billed as
embeddings); this tool gets it as a :class:`FileSearcher` and gives the model the hits as JSON. Searching has no
side effect, so a call cut short by a crash is searched again (``idempotent``); the query's embedding is then billed
again, as a repeated ``/v1/vector_stores/{id}/search`` would be.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from switchyard.agents.tools.base import RetrySemantics, ToolContext, ToolDefinition, ToolKind, ToolResult

__all__ = ["FILE_SEARCH", "QUOTED_CHARS", "FileSearchHit", "FileSearchTool", "FileSearcher", "citations", "hits_of"]

FILE_SEARCH = "file_search"
MAX_QUERY_CHARS = 4096
QUOTED_CHARS = 40
"""How much of a found passage an answer repeats for the passage's file to be cited."""


@dataclass(frozen=True)
class FileSearchHit:
    """One chunk a search found: its file, relevance (higher is better) and text."""

    file_id: str
    filename: str
    score: float
    text: str
    attributes: dict[str, Any] = field(default_factory=dict)


class FileSearcher(Protocol):
    """Searches vector stores for ``query`` (the platform's retrieval, bound to a tenant and its key)."""

    async def __call__(
        self,
        vector_store_ids: Sequence[str],
        query: str,
        *,
        max_num_results: int,
        filters: Mapping[str, Any] | None,
        score_threshold: float,
    ) -> list[FileSearchHit]: ...


class FileSearchTool:
    """Offered to the model as ``file_search(query)``; searches ``vector_store_ids`` on the worker."""

    kind = ToolKind.FILE_SEARCH
    requires_approval = False

    def __init__(
        self,
        searcher: FileSearcher,
        *,
        vector_store_ids: Sequence[str],
        max_num_results: int = 10,
        filters: Mapping[str, Any] | None = None,
        score_threshold: float = 0.0,
    ) -> None:
        self.searcher = searcher
        self.vector_store_ids = tuple(vector_store_ids)
        self.max_num_results = max_num_results
        self.filters = filters
        self.score_threshold = score_threshold
        self.definition = ToolDefinition(
            name=FILE_SEARCH,
            description="Search the user's files for passages relevant to a query; answer from what it returns.",
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS}},
                "required": ["query"],
                "additionalProperties": False,
            },
        )

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return RetrySemantics.IDEMPOTENT

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        hits = await self.searcher(
            self.vector_store_ids,
            str(arguments["query"]),
            max_num_results=self.max_num_results,
            filters=self.filters,
            score_threshold=self.score_threshold,
        )
        return ToolResult(json.dumps({"results": [asdict(hit) for hit in hits]}, sort_keys=True))


def hits_of(output: str | None) -> list[FileSearchHit] | None:
    """The hits a ``file_search`` call's output holds (``None`` for an output that is none: an error's)."""
    try:
        results = json.loads(output or "")["results"]
        return [FileSearchHit(**result) for result in results]
    except (ValueError, KeyError, TypeError):
        return None


def citations(text: str, found: Sequence[FileSearchHit]) -> list[dict[str, Any]]:
    """``file_citation`` annotations of an answer: each file whose found passage (its first ``QUOTED_CHARS``
    characters) or name the answer repeats, cited where that repetition ends; a file it does not repeat is not
    cited (the answer may not have used it)."""
    cited: dict[str, dict[str, Any]] = {}
    for hit in found:
        if hit.file_id in cited:
            continue
        for quoted in (hit.text.strip()[:QUOTED_CHARS], hit.filename):
            at = text.find(quoted) if quoted else -1
            if at >= 0:
                index = at + len(quoted)
                cited[hit.file_id] = {
                    "type": "file_citation", "file_id": hit.file_id, "filename": hit.filename, "index": index
                }  # fmt: skip
                break
    return sorted(cited.values(), key=lambda annotation: annotation["index"])
