"""The clients: ``Switchyard`` (blocking) and ``AsyncSwitchyard`` (asyncio), with the same resources.

    from switchyard.sdk import Switchyard
    client = Switchyard(api_key="sy_...", base_url="http://127.0.0.1:8000/v1")
    agent = client.agents.create(name="helper", model="meta-llama/Llama-3.1-8B-Instruct")

``api_key`` and ``base_url`` default to ``SWITCHYARD_API_KEY`` and ``SWITCHYARD_BASE_URL``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import cached_property
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from switchyard.sdk.base_client import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S, BaseClient, Call
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.resources.account import (
    ApiKeys,
    AsyncApiKeys,
    AsyncAuditLog,
    AsyncMembers,
    AsyncModels,
    AuditLog,
    Members,
    Models,
)
from switchyard.sdk.resources.admin import Admin, AsyncAdmin
from switchyard.sdk.resources.agents import Agents, AsyncAgents
from switchyard.sdk.resources.billing import AsyncBudgets, AsyncInvoices, AsyncUsage, Budgets, Invoices, Usage
from switchyard.sdk.resources.files import AsyncFiles, Files
from switchyard.sdk.resources.threads import AsyncThreads, Threads
from switchyard.sdk.resources.workflows import AsyncWorkflows, Workflows

__all__ = ["AsyncSwitchyard", "Switchyard"]

M = TypeVar("M", bound=BaseModel)


class Switchyard(BaseClient):
    """A blocking client of the Switchyard API; close it (or use ``with``) to release its connections."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(api_key=api_key, base_url=base_url, timeout_s=timeout_s, max_retries=max_retries)
        self._http = http_client or httpx.Client()

    @cached_property
    def agents(self) -> Agents:
        return Agents(self)

    @cached_property
    def workflows(self) -> Workflows:
        return Workflows(self)

    @cached_property
    def files(self) -> Files:
        """Files (``/v1/files``): uploaded whole, read back, deleted."""
        return Files(self)

    @cached_property
    def threads(self) -> Threads:
        return Threads(self)

    @cached_property
    def models(self) -> Models:
        return Models(self)

    @cached_property
    def api_keys(self) -> ApiKeys:
        return ApiKeys(self)

    @cached_property
    def members(self) -> Members:
        return Members(self)

    @cached_property
    def audit_log(self) -> AuditLog:
        return AuditLog(self)

    @cached_property
    def budgets(self) -> Budgets:
        return Budgets(self)

    @cached_property
    def invoices(self) -> Invoices:
        return Invoices(self)

    @cached_property
    def usage(self) -> Usage:
        return Usage(self)

    @cached_property
    def admin(self) -> Admin:
        """Operator routes (tenants, rate cards, credits, fleet, operator audit log): need an operator key."""
        return Admin(self)

    def send(self, call: Call, *, stream: bool = False) -> httpx.Response:
        """Send ``call``, retrying as the retry rules say; the final answer, whatever its status."""
        call = self.keyed(call)
        attempt = 0
        while True:
            try:
                response = self._http.send(self.build_request(self._http, call), stream=stream)
                if stream and not response.is_success:
                    response.read()
            except httpx.TransportError as error:
                delay = self.retry_delay_s(attempt, None)
                if delay is None:
                    raise self.transport_error(error) from error
            else:
                delay = self.retry_delay_s(attempt, response)
                if delay is None:
                    return response
                response.close()
            time.sleep(delay)
            attempt += 1

    def json(self, call: Call) -> Any:
        """The answer's JSON; an error status raises its ``APIStatusError``."""
        return self.decode(self.send(call))

    def request(self, call: Call, cast: type[M]) -> M:
        return cast.model_validate(self.json(call))

    def text(self, call: Call) -> str:
        """The answer as text (CSV, HTML); an error status raises its ``APIStatusError``."""
        response = self.send(call)
        self.raise_for_error(response)
        return response.text

    def content(self, call: Call) -> bytes:
        """The answer's bytes (a file's content); an error status raises its ``APIStatusError``."""
        response = self.send(call)
        self.raise_for_error(response)
        return response.content

    def page(self, call: Call, item: type[M]) -> Page[M]:
        def fetch(cursor: str) -> Page[M]:
            return self.page(Call(call.method, call.path, {**(call.params or {}), "after": cursor}), item)

        return Page(self.json(call), item, fetch)

    @contextmanager
    def open_stream(self, call: Call) -> Iterator[httpx.Response]:
        """A streamed answer (SSE); failures before it starts are retried like any request."""
        response = self.send(call, stream=True)
        try:
            self.raise_for_error(response)
            yield response
        finally:
            response.close()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Switchyard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSwitchyard(BaseClient):
    """An asyncio client of the Switchyard API; ``await client.close()`` (or ``async with``) when done."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(api_key=api_key, base_url=base_url, timeout_s=timeout_s, max_retries=max_retries)
        self._http = http_client or httpx.AsyncClient()

    @cached_property
    def agents(self) -> AsyncAgents:
        return AsyncAgents(self)

    @cached_property
    def workflows(self) -> AsyncWorkflows:
        return AsyncWorkflows(self)

    @cached_property
    def files(self) -> AsyncFiles:
        return AsyncFiles(self)

    @cached_property
    def threads(self) -> AsyncThreads:
        return AsyncThreads(self)

    @cached_property
    def models(self) -> AsyncModels:
        return AsyncModels(self)

    @cached_property
    def api_keys(self) -> AsyncApiKeys:
        return AsyncApiKeys(self)

    @cached_property
    def members(self) -> AsyncMembers:
        return AsyncMembers(self)

    @cached_property
    def audit_log(self) -> AsyncAuditLog:
        return AsyncAuditLog(self)

    @cached_property
    def budgets(self) -> AsyncBudgets:
        return AsyncBudgets(self)

    @cached_property
    def invoices(self) -> AsyncInvoices:
        return AsyncInvoices(self)

    @cached_property
    def usage(self) -> AsyncUsage:
        return AsyncUsage(self)

    @cached_property
    def admin(self) -> AsyncAdmin:
        return AsyncAdmin(self)

    async def send(self, call: Call, *, stream: bool = False) -> httpx.Response:
        """Send ``call``, retrying as the retry rules say; the final answer, whatever its status."""
        call = self.keyed(call)
        attempt = 0
        while True:
            try:
                response = await self._http.send(self.build_request(self._http, call), stream=stream)
                if stream and not response.is_success:
                    await response.aread()
            except httpx.TransportError as error:
                delay = self.retry_delay_s(attempt, None)
                if delay is None:
                    raise self.transport_error(error) from error
            else:
                delay = self.retry_delay_s(attempt, response)
                if delay is None:
                    return response
                await response.aclose()
            await asyncio.sleep(delay)
            attempt += 1

    async def json(self, call: Call) -> Any:
        return self.decode(await self.send(call))

    async def request(self, call: Call, cast: type[M]) -> M:
        return cast.model_validate(await self.json(call))

    async def text(self, call: Call) -> str:
        response = await self.send(call)
        self.raise_for_error(response)
        return response.text

    async def content(self, call: Call) -> bytes:
        response = await self.send(call)
        self.raise_for_error(response)
        return response.content

    async def page(self, call: Call, item: type[M]) -> AsyncPage[M]:
        async def fetch(cursor: str) -> AsyncPage[M]:
            return await self.page(Call(call.method, call.path, {**(call.params or {}), "after": cursor}), item)

        return AsyncPage(await self.json(call), item, fetch)

    @asynccontextmanager
    async def open_stream(self, call: Call) -> AsyncIterator[httpx.Response]:
        response = await self.send(call, stream=True)
        try:
            self.raise_for_error(response)
            yield response
        finally:
            await response.aclose()

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSwitchyard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
