"""Python SDK of the Switchyard API: ``Switchyard`` (blocking) and ``AsyncSwitchyard`` (asyncio).

Typed objects, errors by kind, retries with idempotency keys, pages that iterate over every item, and run event
streams that resume after a dropped connection. Chat completions are OpenAI's wire format: use the ``openai``
client with ``base_url`` pointed at Switchyard for those.
"""

from __future__ import annotations

from switchyard.sdk.base_client import VERSION
from switchyard.sdk.client import AsyncSwitchyard, Switchyard
from switchyard.sdk.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    BudgetExceededError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    SwitchyardError,
    UnprocessableEntityError,
)
from switchyard.sdk.models import (
    Agent,
    AgentVersion,
    ApiKey,
    ApiKeyCreated,
    AuditEvent,
    Budget,
    Credit,
    Deleted,
    File,
    Invoice,
    InvoiceLine,
    Member,
    Message,
    Model,
    RateCard,
    Run,
    RunEvent,
    RunPromptTokensDetails,
    RunStep,
    RunUsage,
    Tenant,
    TenantCreated,
    Thread,
    UsageBucket,
    UsagePage,
    UsageResult,
    Workflow,
    WorkflowVersion,
)
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.streaming import AsyncRunEventStream, RunEventStream

__version__ = VERSION

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "Agent",
    "AgentVersion",
    "ApiKey",
    "ApiKeyCreated",
    "AsyncPage",
    "AsyncRunEventStream",
    "AsyncSwitchyard",
    "AuditEvent",
    "AuthenticationError",
    "BadRequestError",
    "Budget",
    "BudgetExceededError",
    "ConflictError",
    "Credit",
    "Deleted",
    "File",
    "InternalServerError",
    "Invoice",
    "InvoiceLine",
    "Member",
    "Message",
    "Model",
    "NotFoundError",
    "Page",
    "PermissionDeniedError",
    "RateCard",
    "RateLimitError",
    "Run",
    "RunEvent",
    "RunEventStream",
    "RunPromptTokensDetails",
    "RunStep",
    "RunUsage",
    "Switchyard",
    "SwitchyardError",
    "Tenant",
    "TenantCreated",
    "Thread",
    "UnprocessableEntityError",
    "UsageBucket",
    "UsagePage",
    "UsageResult",
    "Workflow",
    "WorkflowVersion",
]
