"""Billing routes: rate cards (operators), budgets, invoices and usage (tenants)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Controller, MediaType, Response, delete, get, post
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.billing import credits, render, service
from switchyard.platform.billing.schemas import (
    BudgetPublic,
    BudgetSet,
    CreditGrant,
    CreditPublic,
    InvoicePublic,
    RateCardCreate,
    RateCardPublic,
    UsagePage,
)
from switchyard.platform.billing.usage import GROUP_BY_FIELDS
from switchyard.platform.deps import CurrentActor, CurrentTenant, DbSession, PageParams
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.openapi import answers
from switchyard.platform.http.pagination import Page
from switchyard.platform.http.timestamps import MAX_UNIX_SECONDS

__all__ = [
    "BudgetController",
    "CreditAdminController",
    "InvoiceController",
    "RateCardAdminController",
    "UsageController",
]

StartTime = Annotated[
    int | None,
    QueryParameter(
        ge=0,
        le=MAX_UNIX_SECONDS,
        description="Window start, Unix seconds (inclusive), before 9999-01-01; default: start of month.",
    ),
]
EndTime = Annotated[
    int | None,
    QueryParameter(
        ge=0, le=MAX_UNIX_SECONDS, description="Window end, Unix seconds (exclusive), before 9999-01-01; default: now."
    ),
]
Width = Annotated[Literal["1h", "1d"], QueryParameter(description="Bucket width: one UTC hour or day.")]
GroupBy = Annotated[
    list[str] | None,
    QueryParameter(
        description="Group results by any of agent_id, workflow_id (the workflow whose run spent it; null outside "
        "workflow runs), api_key_id, model, instance_type (repeat or comma)."
    ),
]


def _group_by(values: list[str] | None) -> list[str]:
    fields = [part.strip() for value in values or [] for part in value.split(",") if part.strip()]
    unknown = sorted(set(fields) - set(GROUP_BY_FIELDS))
    if unknown:
        raise InvalidRequest(f"cannot group by {', '.join(unknown)}", param="group_by", code="invalid_value")
    return list(dict.fromkeys(fields))


class RateCardAdminController(Controller):
    path = "/v1/admin/rate-cards"
    tags = ["Operator: billing"]
    guards = [require_access]

    @get(opt=access("operator"), summary="List rate cards")
    async def list_rate_cards(
        self,
        db_session: DbSession,
        page: PageParams,
        instance_type: Annotated[str | None, QueryParameter(description="Only this instance type.")] = None,
    ) -> Page[RateCardPublic]:
        """Every rate card version, newest first."""
        return await service.list_rate_cards(db_session, params=page, instance_type=instance_type)

    @post(opt=access("operator"), summary="Add a rate card version")
    async def create_rate_card(
        self, db_session: DbSession, actor: CurrentActor, data: JSONBody[RateCardCreate]
    ) -> RateCardPublic:
        """A new price per chip-hour from `effective_from` on; usage already rated keeps its price."""
        return await service.create_rate_card(db_session, actor=actor, data=data)

    @delete(
        "/{rate_card_id:str}",
        opt=access("operator"),
        status_code=HTTP_200_OK,
        summary="Delete a rate card that priced nothing",
    )
    async def delete_rate_card(
        self, db_session: DbSession, actor: CurrentActor, rate_card_id: FromPath[str]
    ) -> dict[str, Any]:
        """Withdraw a mistaken card; one that priced usage, or a catalog baseline card, stays (409)."""
        removed = await service.delete_rate_card(db_session, actor=actor, rate_card_id=rate_card_id)
        return {"object": "rate_card.deleted", "id": removed, "deleted": True}


class BudgetController(Controller):
    path = "/v1/budgets"
    tags = ["Billing"]
    guards = [require_access]

    @post(opt=access(Role.ADMIN), summary="Set a budget")
    async def set_budget(
        self, db_session: DbSession, tenant: CurrentTenant, actor: CurrentActor, data: JSONBody[BudgetSet]
    ) -> BudgetPublic:
        """Create or change the monthly budget of the tenant, an API key, an agent or a workflow."""
        return await service.set_budget(db_session, scope=tenant, actor=actor, data=data)

    @get(opt=access(Role.ADMIN), summary="List budgets")
    async def list_budgets(self, db_session: DbSession, tenant: CurrentTenant, page: PageParams) -> Page[BudgetPublic]:
        """The tenant's budgets with this month's spend, holds and alerts."""
        return await service.list_budgets(db_session, scope=tenant, params=page)

    @get("/{budget_id:str}", opt=access(Role.ADMIN), summary="Get a budget")
    async def get_budget(self, db_session: DbSession, tenant: CurrentTenant, budget_id: FromPath[str]) -> BudgetPublic:
        """One budget."""
        return await service.get_budget(db_session, scope=tenant, budget_id=budget_id)

    @delete("/{budget_id:str}", opt=access(Role.ADMIN), status_code=HTTP_200_OK, summary="Delete a budget")
    async def delete_budget(
        self, db_session: DbSession, tenant: CurrentTenant, actor: CurrentActor, budget_id: FromPath[str]
    ) -> dict[str, Any]:
        """Remove a budget."""
        removed = await service.delete_budget(db_session, scope=tenant, actor=actor, budget_id=budget_id)
        return {"object": "budget.deleted", "id": removed, "deleted": True}


class InvoiceController(Controller):
    path = "/v1/invoices"
    tags = ["Billing"]
    guards = [require_access]

    @get(opt=access(Role.ADMIN), summary="List invoices")
    async def list_invoices(
        self, db_session: DbSession, tenant: CurrentTenant, page: PageParams
    ) -> Page[InvoicePublic]:
        """The tenant's invoices, newest first; drafts show their provisional lines."""
        return await service.list_invoices(db_session, scope=tenant, params=page)

    @get(
        "/{invoice_id:str}",
        opt=access(Role.ADMIN),
        summary="Get an invoice",
        responses=answers(
            HTTP_200_OK,
            "The invoice as JSON, CSV or a printable HTML page (`format`).",
            {"application/json": InvoicePublic, "text/csv": str, "text/html": str},
        ),
    )
    async def get_invoice(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        invoice_id: FromPath[str],
        output: Annotated[
            Literal["json", "csv", "html"], QueryParameter(name="format", description="json, csv or printable html.")
        ] = "json",
    ) -> Response[Any]:
        """One invoice as JSON, CSV or a printable HTML page."""
        invoice = await service.get_invoice(db_session, scope=tenant, invoice_id=invoice_id)
        if output == "csv":
            return Response(
                render.invoice_csv(invoice),
                media_type="text/csv",
                headers={"content-disposition": f'attachment; filename="{invoice.id}.csv"'},
            )
        if output == "html":
            return Response(render.invoice_html(invoice, tenant.tenant_id), media_type=MediaType.HTML)
        return Response(invoice)


class UsageController(Controller):
    path = "/v1/usage"
    tags = ["Billing"]
    guards = [require_access]

    @get(opt=access(Role.VIEWER), summary="Compute usage in buckets")
    async def get_usage(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        start_time: StartTime = None,
        end_time: EndTime = None,
        bucket_width: Width = "1d",
        group_by: GroupBy = None,
        limit: Annotated[int, QueryParameter(ge=1, le=168, description="Buckets per page (1-168).")] = 7,
        page_cursor: Annotated[
            str | None, QueryParameter(name="page", description="`next_page` of the previous page.")
        ] = None,
    ) -> UsagePage:
        """Chip-microseconds, tokens and requests per bucket (the OpenAI usage API's shape)."""
        return await service.usage_page(
            db_session,
            scope=tenant,
            start_time=start_time,
            end_time=end_time,
            width=bucket_width,
            group_by=_group_by(group_by),
            limit=limit,
            page=page_cursor,
        )

    @get(
        "/export.csv",
        opt=access(Role.VIEWER),
        summary="Export usage as CSV",
        responses=answers(HTTP_200_OK, "One row per non-empty (bucket, group) of the window.", {"text/csv": str}),
    )
    async def export_usage(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        start_time: StartTime = None,
        end_time: EndTime = None,
        bucket_width: Width = "1d",
        group_by: GroupBy = None,
    ) -> Response[str]:
        """Every non-empty (bucket, group) of the window as CSV rows."""
        fields = _group_by(group_by)
        buckets = await service.usage_buckets(
            db_session, scope=tenant, start_time=start_time, end_time=end_time, width=bucket_width, group_by=fields
        )
        return Response(
            render.usage_csv(buckets, fields),
            media_type="text/csv",
            headers={"content-disposition": 'attachment; filename="usage.csv"'},
        )


class CreditAdminController(Controller):
    path = "/v1/admin/tenants/{tenant_id:str}/credits"
    tags = ["Operator: billing"]
    guards = [require_access]

    @post(opt=access("operator"), summary="Grant a credit")
    async def grant_credit(
        self, db_session: DbSession, actor: CurrentActor, tenant_id: FromPath[str], data: JSONBody[CreditGrant]
    ) -> CreditPublic:
        """Give a tenant a credit: a negative line on its next finalized invoice, applied exactly once."""
        return await credits.grant_credit(db_session, tenant_id=tenant_id, actor=actor, data=data)

    @get(opt=access("operator"), summary="List a tenant's credits")
    async def list_credits(self, db_session: DbSession, tenant_id: FromPath[str]) -> list[CreditPublic]:
        """Every credit of the tenant, oldest first, and whether an invoice has applied it."""
        return await credits.list_credits(db_session, tenant_id=tenant_id)
