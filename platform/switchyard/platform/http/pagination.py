"""Cursor pagination: ``limit`` (1-100), ``after``, ``before``, ``order`` over time-ordered ids.

A cursor must be the id of an item of the list it pages (as the list is filtered for the caller): anything
else, malformed, unknown, deleted or another tenant's, is 400 ``invalid_value`` naming ``after`` or
``before``, on every list alike, rather than a page silently computed from a string.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar

from litestar.params import QueryParameter
from pydantic import BaseModel
from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped

from switchyard.platform.http.errors import InvalidRequest

__all__ = ["CursorParams", "Page", "cursor_params", "paginate", "unknown_cursor"]

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list: ``{object: "list", data, first_id, last_id, has_more}``."""

    object: Literal["list"] = "list"
    data: list[T]
    first_id: str | None
    last_id: str | None
    has_more: bool


@dataclass(frozen=True, slots=True)
class CursorParams:
    limit: int
    after: str | None
    before: str | None
    order: Literal["asc", "desc"]


def cursor_params(
    limit: Annotated[int, QueryParameter(ge=1, le=100, description="Page size, 1 to 100.")] = 20,
    after: Annotated[
        str | None, QueryParameter(description="Return items after this id (next page); an id of this list.")
    ] = None,
    before: Annotated[
        str | None, QueryParameter(description="Return items before this id (previous page); an id of this list.")
    ] = None,
    order: Annotated[Literal["asc", "desc"], QueryParameter(description="Sort by creation time.")] = "desc",
) -> CursorParams:
    """Dependency reading the pagination query parameters."""
    return CursorParams(limit=limit, after=after, before=before, order=order)


def unknown_cursor(param: str, cursor: str) -> InvalidRequest:
    """The error for a cursor that is not an id of the list being paged."""
    return InvalidRequest(
        f"{param} must be the id of an item of this list (a page's first_id or last_id); {cursor[:100]!r} is not",
        param=param,
        code="invalid_value",
    )


async def paginate(
    session: AsyncSession,
    statement: Select[Any],
    id_column: Mapped[str],
    params: CursorParams,
    to_public: Callable[[Any], T],
) -> Page[T]:
    """Run ``statement`` (already scoped and filtered) for one page in the requested order."""
    for param, cursor in (("after", params.after), ("before", params.before)):
        if cursor is not None:
            found = await session.execute(statement.with_only_columns(id_column).where(id_column == cursor).limit(1))
            if found.first() is None:
                raise unknown_cursor(param, cursor)
    descending = params.order == "desc"
    if params.after is not None:
        statement = statement.where(id_column < params.after if descending else id_column > params.after)
    if params.before is not None:
        statement = statement.where(id_column > params.before if descending else id_column < params.before)
    # A page "before" a cursor is read backwards from the cursor, then put back in display order.
    backwards = params.before is not None and params.after is None
    ascending = descending == backwards
    statement = statement.order_by(id_column.asc() if ascending else id_column.desc()).limit(params.limit + 1)
    rows: Sequence[Any] = (await session.execute(statement)).scalars().all()
    has_more = len(rows) > params.limit
    rows = list(rows[: params.limit])
    if backwards:
        rows.reverse()
    data = [to_public(row) for row in rows]
    return Page(
        data=data,
        first_id=rows[0].id if rows else None,
        last_id=rows[-1].id if rows else None,
        has_more=has_more,
    )
