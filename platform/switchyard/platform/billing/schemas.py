"""Billing API schemas. Money is integer minor units plus a currency, or an exact decimal string: never a float."""

from __future__ import annotations

import calendar
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.config import JsonDict

from switchyard.platform.billing.budgets import (
    ALERT_THRESHOLDS,
    MAX_ALERT_THRESHOLDS,
    alert_thresholds_of,
    check_alert_thresholds,
    limit_micros,
)
from switchyard.platform.billing.invoices import LineDraft
from switchyard.platform.billing.money import CURRENCY_EXPONENTS, chip_hours, format_minor
from switchyard.platform.billing.usage import UsageBucket
from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.http.timestamps import UtcDatetime
from switchyard.platform.models import Budget, BudgetAlert, Invoice, RateCard
from switchyard.platform.models.rate_card import ANY

__all__ = [
    "MAX_LIMIT_MINOR",
    "BudgetAlertPublic",
    "BudgetPublic",
    "BudgetSet",
    "InvoiceLinePublic",
    "InvoicePublic",
    "RateCardCreate",
    "RateCardPublic",
    "UsageBucketPublic",
    "UsagePage",
    "UsageResult",
]

PRICE_PATTERN = r"^[0-9]{1,9}(\.[0-9]{1,15})?$"
CURRENCY_PATTERN = r"^[A-Z]{3}$"
CURRENCIES: JsonDict = {"enum": [code for code in sorted(CURRENCY_EXPONENTS)]}
"""The currencies money can be kept in (a code outside them is refused with 400)."""
_DEFAULTS = ", ".join(str(pct) for pct in ALERT_THRESHOLDS)
AlertThresholds = Annotated[
    list[Annotated[int, Field(ge=1, le=100)]],
    Field(min_length=1, max_length=MAX_ALERT_THRESHOLDS, json_schema_extra={"uniqueItems": True}),
]


MAX_LIMIT_MINOR = 10**15
"""The largest budget limit, in minor units (10 trillion USD)."""


def _micros(value: int) -> str:
    """Micro-units as an exact decimal string with six places: ``1_500_000`` → ``"1.500000"``."""
    return format(Decimal(value).scaleb(-6), "f") if value else "0.000000"


class RateCardCreate(BaseModel):
    """A new rate card version; it applies from ``effective_from`` (default: now) until a newer one does."""

    model_config = REQUEST_BODY

    instance_type: str = Field(
        min_length=1,
        max_length=64,
        description="An instance type of the hardware catalog as AWS spells it, or `custom:<name>` (letters, digits, "
        "`.`, `_`, `-`) for hardware outside it, as an openai-compatible deployment's `instance` names it; any other "
        "is refused (400).",
        examples=["trn2.48xlarge"],
    )
    price_per_chip_hour: str = Field(
        pattern=PRICE_PATTERN,
        description="Exact decimal price of one chip-hour, up to 15 decimal places (a string, never a float).",
        examples=["2.936250000000"],
    )
    currency: str = Field(
        default="USD", pattern=CURRENCY_PATTERN, json_schema_extra=CURRENCIES, description="ISO 4217 currency code."
    )
    model: str = Field(default=ANY, min_length=1, max_length=200, description="Model name, or `*` for all.")
    tenant_tier: str = Field(default=ANY, min_length=1, max_length=32, description="Tenant tier, or `*` for all.")
    effective_from: UtcDatetime | None = Field(
        default=None,
        strict=False,
        description="When the price starts to apply, with its timezone; not in the past, before 9999-01-01. "
        "Default: now.",
    )
    source: str = Field(default="", max_length=500, description="Where the price comes from.")


class RateCardPublic(BaseModel):
    object: Literal["rate_card"] = "rate_card"
    id: str
    instance_type: str
    model: str
    tenant_tier: str
    currency: str
    price_per_chip_hour: str = Field(description="Exact decimal string.")
    effective_from: datetime
    source: str
    created_at: datetime

    @classmethod
    def of(cls, row: RateCard) -> RateCardPublic:
        return cls(
            id=row.id,
            instance_type=row.instance_type,
            model=row.model,
            tenant_tier=row.tenant_tier,
            currency=row.currency,
            price_per_chip_hour=format(row.price_per_chip_hour, "f"),
            effective_from=row.effective_from,
            source=row.source,
            created_at=row.created_at,
        )


class BudgetSet(BaseModel):
    """Set (create or replace) the monthly budget of the tenant, one of its API keys, agents or workflows."""

    model_config = REQUEST_BODY | ConfigDict(
        json_schema_extra={  # a key, agent or workflow budget names it; a tenant budget names nothing
            "if": {"properties": {"scope": {"enum": ["api_key", "agent", "workflow"]}}, "required": ["scope"]},
            "then": {"properties": {"scope_id": {"minLength": 1}}, "required": ["scope_id"]},
            "else": {"properties": {"scope_id": {"maxLength": 0}}},
        },
    )

    limit_minor: int = Field(
        ge=0,
        le=MAX_LIMIT_MINOR,
        description="Monthly limit in minor units of `currency` (cents for USD).",
        examples=[10000],
    )
    currency: str = Field(
        default="USD",
        pattern=CURRENCY_PATTERN,
        json_schema_extra=CURRENCIES,
        description="ISO 4217 code; must match prices.",
    )
    scope: Literal["tenant", "api_key", "agent", "workflow"] = Field(
        default="tenant",
        description="What the budget covers: the tenant, one API key, one agent (its model calls wherever it acts), "
        "or one workflow (every model call of its runs, whichever agent makes it).",
    )
    scope_id: str = Field(default="", max_length=40, description="The key, agent or workflow id (empty for `tenant`).")
    hard: bool = Field(default=True, description="Refuse requests (402) past the limit; else only alert.")
    alert_thresholds: AlertThresholds | None = Field(
        default=None,
        description=f"Percentages of the limit (1 to {MAX_ALERT_THRESHOLDS} distinct whole numbers, 1-100, in any "
        f"order; stored sorted) at which an alert is recorded, once a month each. Null or absent: {_DEFAULTS}. "
        "Setting a budget replaces its thresholds too.",
        examples=[[10, 50, 90]],
    )

    @field_validator("alert_thresholds")
    @classmethod
    def _distinct(cls, values: list[int] | None) -> list[int] | None:
        """JSON Schema's ``uniqueItems`` is not checked by pydantic: the budget's own rule is."""
        return None if values is None else check_alert_thresholds(values)


class BudgetPublic(BaseModel):
    object: Literal["budget"] = "budget"
    id: str
    scope: str
    scope_id: str
    currency: str
    limit_minor: int
    hard: bool
    alert_thresholds: list[int] = Field(
        description=f"Percentages of the limit that alert, sorted: the budget's own, else {_DEFAULTS}."
    )
    period_start: datetime
    spent: str = Field(description="Settled spend this month, in the major unit (exact decimal string).")
    reserved: str = Field(description="Held for requests in flight, in the major unit.")
    remaining: str = Field(description="What is left this month, in the major unit (never negative).")
    alerts_fired: list[int] = Field(description="Thresholds (% of the limit) already alerted this month.")
    updated_at: datetime

    @classmethod
    def of(cls, row: Budget, *, current_period: datetime, alerts: list[int]) -> BudgetPublic:
        spent = row.spent_micros if row.period_start >= current_period else 0
        remaining = max(0, limit_micros(row) - spent - row.reserved_micros)
        return cls(
            id=row.id,
            scope=row.scope_kind,
            scope_id=row.scope_ref,
            currency=row.currency,
            limit_minor=row.limit_minor,
            hard=row.hard,
            alert_thresholds=list(alert_thresholds_of(row)),
            period_start=max(row.period_start, current_period),
            spent=_micros(spent),
            reserved=_micros(row.reserved_micros),
            remaining=_micros(remaining),
            alerts_fired=alerts if row.period_start >= current_period else [],
            updated_at=row.updated_at,
        )


class BudgetAlertPublic(BaseModel):
    """An alert fired this month: ``budget_id`` reached ``threshold_pct`` % of its limit at ``created_at``."""

    object: Literal["budget.alert"] = "budget.alert"
    id: str
    budget_id: str
    scope: str
    scope_id: str
    threshold_pct: int
    currency: str
    spent: str = Field(description="The month's settled spend when it fired, in the major unit.")
    created_at: datetime

    @classmethod
    def of(cls, row: BudgetAlert, budget: Budget) -> BudgetAlertPublic:
        return cls(
            id=row.id,
            budget_id=row.budget_id,
            scope=budget.scope_kind,
            scope_id=budget.scope_ref,
            threshold_pct=row.threshold_pct,
            currency=budget.currency,
            spent=_micros(row.spent_micros),
            created_at=row.created_at,
        )


class InvoiceLinePublic(BaseModel):
    object: Literal["invoice.line"] = "invoice.line"
    kind: Literal["usage", "adjustment", "credit"]
    description: str
    instance_type: str
    model: str
    usage_period_start: datetime
    chip_us: int
    quantity_chip_hours: str = Field(description="chip_us / 3.6e9, shown to 9 decimal places.")
    unit_price: str | None = Field(description="Price per chip-hour; null when the rate changed within the line.")
    event_count: int
    input_tokens: int = Field(description="Prompt tokens of the model requests the line bills (0 on a credit).")
    input_cached_tokens: int = Field(
        description="Of input_tokens, those read from a replica's prefix cache (as `/v1/usage` counts them); "
        "chip_us already reflects what they cost."
    )
    cache_saved_chip_us: int = Field(
        description="What computing those cached tokens would have cost beyond reading them (an estimate, as "
        "`/v1/usage` reports it; not billed)."
    )
    currency: str
    amount_minor: int
    amount: str = Field(description="`amount_minor` in the major unit, e.g. `12.34`.")

    @classmethod
    def of(cls, line: LineDraft) -> InvoiceLinePublic:
        amount = line.amount_minor
        return cls(
            kind="credit" if line.kind == "credit" else "usage" if line.kind == "usage" else "adjustment",
            description=line.description,
            instance_type=line.instance_type,
            model=line.model,
            usage_period_start=line.usage_period_start,
            chip_us=line.chip_us,
            quantity_chip_hours=str(chip_hours(line.chip_us)),
            unit_price=None if line.unit_price is None else format(line.unit_price, "f"),
            event_count=line.event_count,
            input_tokens=line.input_tokens,
            input_cached_tokens=line.input_cached_tokens,
            cache_saved_chip_us=line.cache_saved_chip_us,
            currency=line.currency,
            amount_minor=amount,
            amount=format_minor(amount, line.currency),
        )


class InvoicePublic(BaseModel):
    object: Literal["invoice"] = "invoice"
    id: str
    status: Literal["draft", "finalized"]
    period_start: datetime
    period_end: datetime
    currency: str
    total_minor: int = Field(description="Sum of the lines' amounts (a draft's is provisional).")
    total: str
    lines: list[InvoiceLinePublic]
    created_at: datetime
    finalized_at: datetime | None

    @classmethod
    def of(cls, row: Invoice, lines: list[LineDraft]) -> InvoicePublic:
        public_lines = [InvoiceLinePublic.of(line) for line in lines]
        total = sum(line.amount_minor for line in public_lines)
        currency = public_lines[0].currency if public_lines else row.currency
        return cls(
            id=row.id,
            status="finalized" if row.status == "finalized" else "draft",
            period_start=row.period_start,
            period_end=row.period_end,
            currency=currency,
            total_minor=total,
            total=format_minor(total, currency),
            lines=public_lines,
            created_at=row.created_at,
            finalized_at=row.finalized_at,
        )


class UsageResult(BaseModel):
    """Totals of one group in one bucket (fields not grouped by are null)."""

    object: Literal["organization.usage.compute"] = "organization.usage.compute"
    chip_us: int
    input_tokens: int
    output_tokens: int
    input_cached_tokens: int = Field(
        description="Of input_tokens, those read from a replica's prefix cache (OpenAI's name); chip_us already "
        "reflects what they cost."
    )
    cache_saved_chip_us: int = Field(
        description="What computing the cached input tokens would have cost beyond reading them: the simulated "
        "fleet's estimate from its prefill rate (it errs low), 0 where nothing was cached or an upstream does not "
        "say. Not billed."
    )
    num_model_requests: int
    agent_id: str | None = None
    workflow_id: str | None = None
    api_key_id: str | None = None
    model: str | None = None
    instance_type: str | None = None


class UsageBucketPublic(BaseModel):
    object: Literal["bucket"] = "bucket"
    start_time: int = Field(description="Unix seconds, inclusive.")
    end_time: int = Field(description="Unix seconds, exclusive.")
    results: list[UsageResult]

    @classmethod
    def of(cls, bucket: UsageBucket) -> UsageBucketPublic:
        return cls(
            start_time=calendar.timegm(bucket.start.utctimetuple()),
            end_time=calendar.timegm(bucket.end.utctimetuple()),
            results=[
                UsageResult(
                    chip_us=row.chip_us,
                    input_tokens=row.input_tokens,
                    output_tokens=row.output_tokens,
                    input_cached_tokens=row.input_cached_tokens,
                    cache_saved_chip_us=row.cache_saved_chip_us,
                    num_model_requests=row.num_model_requests,
                    agent_id=row.group.get("agent_id"),
                    workflow_id=row.group.get("workflow_id"),
                    api_key_id=row.group.get("api_key_id"),
                    model=row.group.get("model"),
                    instance_type=row.group.get("instance_type"),
                )
                for row in bucket.rows
            ],
        )


class UsagePage(BaseModel):
    """OpenAI usage API shape: a page of buckets; pass ``next_page`` as ``page`` for the next one."""

    object: Literal["page"] = "page"
    data: list[UsageBucketPublic]
    has_more: bool
    next_page: str | None


class CreditGrant(BaseModel):
    """A credit for a tenant: a negative line on its next finalized invoice."""

    model_config = REQUEST_BODY

    amount_minor: int = Field(gt=0, le=10**12, description="Minor units of `currency`.", examples=[500])
    currency: str = Field(
        default="USD",
        pattern=CURRENCY_PATTERN,
        json_schema_extra=CURRENCIES,
        description="Must match the tenant's prices.",
    )
    reason: str = Field(min_length=1, max_length=300, examples=["Service credit for the 2026-11 outage"])

    @field_validator("currency")
    @classmethod
    def _known(cls, currency: str) -> str:
        """Invoices format every line in its currency: a credit in an unknown one would break them."""
        if currency not in CURRENCY_EXPONENTS:
            raise ValueError(f"unsupported currency {currency!r}")
        return currency


class CreditPublic(BaseModel):
    object: Literal["credit"] = "credit"
    id: str
    tenant_id: str
    amount_minor: int
    currency: str
    reason: str
    granted_by: str
    created_at: datetime
    applied: bool = Field(description="Whether a finalized invoice has taken it.")
