"""The API's objects as typed, read-only models.

Fields the SDK does not know yet are kept (``extra="allow"``), so an older SDK keeps working against a newer
API. Money is ``Decimal`` (or integer minor units), times are timezone-aware ``datetime``, compute is integer
chip-microseconds.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "RUN_FINAL_STATUSES",
    "Agent",
    "AgentVersion",
    "ApiKey",
    "ApiKeyCreated",
    "AuditEvent",
    "Budget",
    "Credit",
    "Deleted",
    "File",
    "Invoice",
    "InvoiceLine",
    "Member",
    "Message",
    "Model",
    "RateCard",
    "Run",
    "RunEvent",
    "RunPromptTokensDetails",
    "RunStep",
    "RunUsage",
    "SwitchyardObject",
    "Tenant",
    "TenantCreated",
    "Thread",
    "UsageBucket",
    "UsagePage",
    "UsageResult",
    "Workflow",
    "WorkflowVersion",
]

RUN_FINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "incomplete", "expired"})
"""A run in one of these states will not change again."""


class SwitchyardObject(BaseModel):
    """Base of every API object: immutable, unknown fields kept."""

    model_config = ConfigDict(extra="allow", frozen=True)


class Deleted(SwitchyardObject):
    object: str
    id: str
    deleted: bool


class File(SwitchyardObject):
    """An uploaded file (OpenAI's ``FileObject``); its bytes are ``files.content(id)``."""

    object: Literal["file"] = "file"
    id: str
    bytes: int
    created_at: datetime
    filename: str
    purpose: str
    status: str
    expires_at: datetime | None = None


class AgentFields(SwitchyardObject):
    name: str
    instructions: str
    model: str
    tools: list[dict[str, Any]]
    handoffs: list[dict[str, Any]]
    guardrails: dict[str, Any]
    model_params: dict[str, Any]
    limits: dict[str, Any]
    metadata: dict[str, str]
    version: int
    created_at: datetime


class Agent(AgentFields):
    """An agent; ``version`` is its current version (every change makes a new one)."""

    object: Literal["agent"] = "agent"
    id: str
    updated_at: datetime


class AgentVersion(AgentFields):
    """An immutable snapshot of an agent; runs record the version they used."""

    object: Literal["agent.version"] = "agent.version"
    id: str
    agent_id: str


class WorkflowFields(SwitchyardObject):
    name: str
    description: str
    start: str
    state: dict[str, Any]
    nodes: list[dict[str, Any]]
    metadata: dict[str, str]
    version: int
    created_at: datetime


class Workflow(WorkflowFields):
    """A workflow; ``version`` is its current version (every change makes a new one)."""

    object: Literal["workflow"] = "workflow"
    id: str
    updated_at: datetime


class WorkflowVersion(WorkflowFields):
    """An immutable snapshot of a workflow; runs record the version they used."""

    object: Literal["workflow.version"] = "workflow.version"
    id: str
    workflow_id: str


class Thread(SwitchyardObject):
    object: Literal["thread"] = "thread"
    id: str
    created_at: datetime
    metadata: dict[str, str]


class Message(SwitchyardObject):
    object: Literal["thread.message"] = "thread.message"
    id: str
    thread_id: str
    run_id: str | None
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]]
    tool_call_id: str | None
    created_at: datetime


class RunPromptTokensDetails(SwitchyardObject):
    cached_tokens: int
    """Of the run's ``prompt_tokens``, those read from a replica's prefix cache (their cost is in ``chip_us``)."""


class RunUsage(SwitchyardObject):
    """The tokens of every model call of a run, summed."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: RunPromptTokensDetails


class Run(SwitchyardObject):
    """A run of an agent on a thread. ``required_action`` is set while it waits for tool outputs or approvals."""

    object: Literal["thread.run"] = "thread.run"
    id: str
    thread_id: str
    agent_id: str
    agent_version: int
    status: str
    required_action: dict[str, Any] | None
    last_error: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None
    usage: RunUsage
    chip_us: int
    step_count: int
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    metadata: dict[str, str]

    @property
    def is_final(self) -> bool:
        """True once the run will not change again."""
        return self.status in RUN_FINAL_STATUSES


class RunStep(SwitchyardObject):
    """A model call or a tool call of a run, with its timings, tokens and chip-microseconds."""

    object: Literal["thread.run.step"] = "thread.run.step"
    id: str
    run_id: str
    thread_id: str
    index: int
    type: str
    status: str
    agent_id: str
    step_details: dict[str, Any]
    created_at: datetime
    completed_at: datetime | None
    duration_ms: int | None


class RunEvent(SwitchyardObject):
    """One server-sent event of a run: a dotted ``event`` name (``thread.run.completed``, ...) and its data."""

    event: str
    sequence_number: int
    data: dict[str, Any]


class Model(SwitchyardObject):
    object: Literal["model"] = "model"
    id: str
    created: int
    owned_by: str
    backend: str
    instance_type: str
    context_window: int


class ApiKey(SwitchyardObject):
    object: Literal["api_key"] = "api_key"
    id: str
    name: str
    role: str
    redacted_value: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKey):
    """A new key; ``value`` is the secret, returned this once."""

    value: str


class Member(SwitchyardObject):
    object: Literal["member"] = "member"
    id: str
    email: str
    role: str
    created_at: datetime


class AuditEvent(SwitchyardObject):
    """One change, with who made it (``actor``: a key id) and the request that made it."""

    object: str
    id: str
    actor: str
    action: str
    target_type: str
    target_id: str
    details: dict[str, Any]
    request_id: str | None
    created_at: datetime


class Budget(SwitchyardObject):
    object: Literal["budget"] = "budget"
    id: str
    scope: str
    scope_id: str
    currency: str
    limit_minor: int
    hard: bool
    period_start: datetime
    spent: Decimal
    reserved: Decimal
    remaining: Decimal
    alerts_fired: list[int]
    updated_at: datetime


class InvoiceLine(SwitchyardObject):
    object: Literal["invoice.line"] = "invoice.line"
    kind: str
    description: str
    instance_type: str
    model: str
    chip_us: int
    quantity_chip_hours: Decimal
    unit_price: Decimal | None
    event_count: int
    input_tokens: int
    input_cached_tokens: int
    """Of ``input_tokens``, those read from a replica's prefix cache (their cost is in ``chip_us``)."""
    cache_saved_chip_us: int
    """What computing those cached tokens would have cost beyond reading them (an estimate; not billed)."""
    currency: str
    amount_minor: int
    amount: Decimal


class Invoice(SwitchyardObject):
    object: Literal["invoice"] = "invoice"
    id: str
    status: str
    period_start: datetime
    period_end: datetime
    currency: str
    total_minor: int
    total: Decimal
    lines: list[InvoiceLine]
    created_at: datetime
    finalized_at: datetime | None


class UsageResult(SwitchyardObject):
    chip_us: int
    input_tokens: int
    output_tokens: int
    input_cached_tokens: int
    """Of ``input_tokens``, those read from a replica's prefix cache (their cost is in ``chip_us``)."""
    cache_saved_chip_us: int
    """What computing those cached tokens would have cost beyond reading them (an estimate; not billed)."""
    num_model_requests: int
    agent_id: str | None = None
    workflow_id: str | None = None
    """The workflow whose runs spent it (grouped by ``workflow_id``; ``None`` for usage outside workflow runs)."""
    api_key_id: str | None = None
    model: str | None = None
    instance_type: str | None = None


class UsageBucket(SwitchyardObject):
    start_time: int
    end_time: int
    results: list[UsageResult]


class UsagePage(SwitchyardObject):
    """Usage in time buckets; pass ``next_page`` as ``page`` to get the following buckets."""

    data: list[UsageBucket]
    has_more: bool
    next_page: str | None


class Tenant(SwitchyardObject):
    object: Literal["tenant"] = "tenant"
    id: str
    name: str
    created_at: datetime


class TenantCreated(Tenant):
    """A new tenant with its first owner key (shown this once)."""

    owner_key: ApiKeyCreated


class RateCard(SwitchyardObject):
    object: Literal["rate_card"] = "rate_card"
    id: str
    instance_type: str
    model: str
    tenant_tier: str
    currency: str
    price_per_chip_hour: Decimal
    effective_from: datetime
    source: str
    created_at: datetime


class Credit(SwitchyardObject):
    object: Literal["credit"] = "credit"
    id: str
    tenant_id: str
    amount_minor: int
    currency: str
    reason: str
    granted_by: str
    created_at: datetime
    applied: bool
