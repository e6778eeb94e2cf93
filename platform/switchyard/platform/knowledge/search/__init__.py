"""Search over vector stores: a full-text index in each layout, exact vector similarity and their fusion.

``search_vector_stores`` is what ``POST /v1/vector_stores/{id}/search`` and the ``file_search`` tool both call.
"""

from __future__ import annotations

from switchyard.platform.knowledge.search.embedding import GatewayEmbedder, QueryEmbedder
from switchyard.platform.knowledge.search.filters import Filter, matches, parse_filter
from switchyard.platform.knowledge.search.service import SearchDeps, SearchHit, fuse, search_vector_stores
from switchyard.platform.knowledge.search.vectors import PROCESS_MATRICES, StoreMatrixCache

__all__ = [
    "PROCESS_MATRICES",
    "Filter",
    "GatewayEmbedder",
    "QueryEmbedder",
    "SearchDeps",
    "SearchHit",
    "StoreMatrixCache",
    "fuse",
    "matches",
    "parse_filter",
    "search_vector_stores",
]
