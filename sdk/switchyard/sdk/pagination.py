"""Cursor pages. Iterating a page walks every item of the list, fetching the following pages as it goes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

__all__ = ["AsyncPage", "Page"]

M = TypeVar("M", bound=BaseModel)


class PageFields(Generic[M]):
    def __init__(self, body: dict[str, Any], item: type[M]) -> None:
        self.data: Sequence[M] = [item.model_validate(row) for row in body["data"]]
        self.has_more: bool = bool(body.get("has_more"))
        self.first_id: str | None = body.get("first_id")
        self.last_id: str | None = body.get("last_id")

    @property
    def next_cursor(self) -> str | None:
        """The ``after`` cursor of the following page, ``None`` on the last page."""
        return self.last_id if self.has_more else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(data=[{len(self.data)} items], has_more={self.has_more})"


class Page(PageFields[M]):
    """One page of a list (``data``, ``has_more``); ``for item in page`` goes through all pages."""

    def __init__(self, body: dict[str, Any], item: type[M], fetch: Callable[[str], Page[M]]) -> None:
        super().__init__(body, item)
        self._fetch = fetch

    def next_page(self) -> Page[M] | None:
        cursor = self.next_cursor
        return None if cursor is None else self._fetch(cursor)

    def __iter__(self) -> Iterator[M]:
        page: Page[M] | None = self
        while page is not None:
            yield from page.data
            page = page.next_page()


class AsyncPage(PageFields[M]):
    """One page of a list; ``async for item in page`` goes through all pages."""

    def __init__(self, body: dict[str, Any], item: type[M], fetch: Callable[[str], Awaitable[AsyncPage[M]]]) -> None:
        super().__init__(body, item)
        self._fetch = fetch

    async def next_page(self) -> AsyncPage[M] | None:
        cursor = self.next_cursor
        return None if cursor is None else await self._fetch(cursor)

    async def __aiter__(self) -> AsyncIterator[M]:
        page: AsyncPage[M] | None = self
        while page is not None:
            for item in page.data:
                yield item
            page = await page.next_page()
