"""Budgets, invoices and compute usage of the tenant."""

from __future__ import annotations

from typing import Literal, Unpack

from switchyard.sdk.base_client import Call
from switchyard.sdk.models import Budget, Deleted, Invoice, UsagePage
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.params import BudgetSetParams, ListParams, UsageParams
from switchyard.sdk.resources.base import AsyncResource, SyncResource, segment

__all__ = ["AsyncBudgets", "AsyncInvoices", "AsyncUsage", "Budgets", "Invoices", "Usage"]

InvoiceFormat = Literal["csv", "html"]


def _usage(path: str, params: UsageParams, extra: dict[str, object] | None = None) -> Call:
    query: dict[str, object] = {**params, **(extra or {})}
    if "group_by" in params:
        query["group_by"] = ",".join(params["group_by"])
    return Call("GET", path, params=query)


def _invoice(invoice_id: str, output: InvoiceFormat | None = None) -> Call:
    return Call("GET", f"/invoices/{segment(invoice_id)}", params={"format": output})


class Budgets(SyncResource):
    def set(self, **params: Unpack[BudgetSetParams]) -> Budget:
        """Set the monthly budget of the tenant, an API key or an agent (replacing the one it had)."""
        return self._client.request(Call("POST", "/budgets", body=params), Budget)

    def retrieve(self, budget_id: str) -> Budget:
        return self._client.request(Call("GET", f"/budgets/{segment(budget_id)}"), Budget)

    def delete(self, budget_id: str) -> Deleted:
        return self._client.request(Call("DELETE", f"/budgets/{segment(budget_id)}"), Deleted)

    def list(self, **params: Unpack[ListParams]) -> Page[Budget]:
        return self._client.page(Call("GET", "/budgets", params=params), Budget)


class Invoices(SyncResource):
    def list(self, **params: Unpack[ListParams]) -> Page[Invoice]:
        return self._client.page(Call("GET", "/invoices", params=params), Invoice)

    def retrieve(self, invoice_id: str) -> Invoice:
        return self._client.request(_invoice(invoice_id), Invoice)

    def download(self, invoice_id: str, *, output: InvoiceFormat = "csv") -> str:
        """The invoice as CSV lines or as a printable HTML page."""
        return self._client.text(_invoice(invoice_id, output))


class Usage(SyncResource):
    def retrieve(
        self, *, limit: int | None = None, page: str | None = None, **params: Unpack[UsageParams]
    ) -> UsagePage:
        """Chip-microseconds, tokens and requests in hourly or daily buckets, optionally grouped."""
        return self._client.request(_usage("/usage", params, {"limit": limit, "page": page}), UsagePage)

    def export_csv(self, **params: Unpack[UsageParams]) -> str:
        return self._client.text(_usage("/usage/export.csv", params))


class AsyncBudgets(AsyncResource):
    async def set(self, **params: Unpack[BudgetSetParams]) -> Budget:
        return await self._client.request(Call("POST", "/budgets", body=params), Budget)

    async def retrieve(self, budget_id: str) -> Budget:
        return await self._client.request(Call("GET", f"/budgets/{segment(budget_id)}"), Budget)

    async def delete(self, budget_id: str) -> Deleted:
        return await self._client.request(Call("DELETE", f"/budgets/{segment(budget_id)}"), Deleted)

    async def list(self, **params: Unpack[ListParams]) -> AsyncPage[Budget]:
        return await self._client.page(Call("GET", "/budgets", params=params), Budget)


class AsyncInvoices(AsyncResource):
    async def list(self, **params: Unpack[ListParams]) -> AsyncPage[Invoice]:
        return await self._client.page(Call("GET", "/invoices", params=params), Invoice)

    async def retrieve(self, invoice_id: str) -> Invoice:
        return await self._client.request(_invoice(invoice_id), Invoice)

    async def download(self, invoice_id: str, *, output: InvoiceFormat = "csv") -> str:
        return await self._client.text(_invoice(invoice_id, output))


class AsyncUsage(AsyncResource):
    async def retrieve(
        self, *, limit: int | None = None, page: str | None = None, **params: Unpack[UsageParams]
    ) -> UsagePage:
        return await self._client.request(_usage("/usage", params, {"limit": limit, "page": page}), UsagePage)

    async def export_csv(self, **params: Unpack[UsageParams]) -> str:
        return await self._client.text(_usage("/usage/export.csv", params))
