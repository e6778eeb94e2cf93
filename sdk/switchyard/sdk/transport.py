"""What resources and streams need of a client, as protocols: the clients implement them, so resources depend
on these and never on the clients that hold them."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Protocol, TypeVar

import httpx
from pydantic import BaseModel

from switchyard.sdk.base_client import Call
from switchyard.sdk.pagination import AsyncPage, Page

__all__ = ["AsyncTransport", "SyncTransport"]

M = TypeVar("M", bound=BaseModel)


class SyncTransport(Protocol):
    max_retries: int

    def json(self, call: Call) -> Any: ...

    def request(self, call: Call, cast: type[M]) -> M: ...

    def page(self, call: Call, item: type[M]) -> Page[M]: ...

    def text(self, call: Call) -> str: ...

    def content(self, call: Call) -> bytes: ...

    def open_stream(self, call: Call) -> AbstractContextManager[httpx.Response]: ...


class AsyncTransport(Protocol):
    max_retries: int

    async def json(self, call: Call) -> Any: ...

    async def request(self, call: Call, cast: type[M]) -> M: ...

    async def page(self, call: Call, item: type[M]) -> AsyncPage[M]: ...

    async def text(self, call: Call) -> str: ...

    async def content(self, call: Call) -> bytes: ...

    def open_stream(self, call: Call) -> AbstractAsyncContextManager[httpx.Response]: ...
