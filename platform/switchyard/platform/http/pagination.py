"""Cursor pagination: ``limit`` (1-100), ``after``, ``before``, ``order`` over time-ordered ids."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar

from litestar.params import QueryParameter
from pydantic import BaseModel
from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped

__all__ = ["CursorParams", "Page", "cursor_params", "paginate"]

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
    after: Annotated[str | None, QueryParameter(description="Return items after this id (next page).")] = None,
    before: Annotated[str | None, QueryParameter(description="Return items before this id (previous page).")] = None,
    order: Annotated[Literal["asc", "desc"], QueryParameter(description="Sort by creation time.")] = "desc",
) -> CursorParams:
    """Dependency reading the pagination query parameters."""
    return CursorParams(limit=limit, after=after, before=before, order=order)


async def paginate(
    session: AsyncSession,
    statement: Select[Any],
    id_column: Mapped[str],
    params: CursorParams,
    to_public: Callable[[Any], T],
) -> Page[T]:
    """Run ``statement`` (already scoped and filtered) for one page in the requested order."""
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
