"""Request parameters as ``TypedDict``s: keyword arguments of the resource methods, checked by type checkers.

A key left out is not sent (the API's default applies); for updates, a key left out is left unchanged.
Tools, model parameters and limits are the API's JSON shapes (see the API reference at ``/schema``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Required, TypedDict

__all__ = [
    "AgentCreateParams",
    "AgentUpdateParams",
    "ApiKeyCreateParams",
    "ApprovalDecision",
    "BudgetSetParams",
    "CreditGrantParams",
    "FileListParams",
    "ListParams",
    "MessageCreateParams",
    "RateCardCreateParams",
    "RunCreateParams",
    "TenantCreateParams",
    "ThreadAndRunParams",
    "ThreadCreateParams",
    "ToolOutput",
    "UsageParams",
]

Role = Literal["owner", "admin", "developer", "viewer"]


class ListParams(TypedDict, total=False):
    limit: int
    """Items per page, 1-100 (iterating a page fetches the following ones)."""
    order: Literal["asc", "desc"]
    after: str
    before: str


class FileListParams(ListParams, total=False):
    purpose: str
    """Only files of this purpose. A page holds up to 10,000 files (``limit``, by default all of them)."""


class AgentCreateParams(TypedDict, total=False):
    name: Required[str]
    model: Required[str]
    instructions: str
    tools: list[dict[str, Any]]
    handoffs: list[dict[str, Any]]
    guardrails: dict[str, Any]
    model_params: dict[str, Any]
    limits: dict[str, Any]
    metadata: dict[str, str]


class AgentUpdateParams(TypedDict, total=False):
    name: str
    model: str
    instructions: str
    tools: list[dict[str, Any]]
    handoffs: list[dict[str, Any]]
    guardrails: dict[str, Any]
    model_params: dict[str, Any]
    limits: dict[str, Any]
    metadata: dict[str, str]


class WorkflowCreateParams(TypedDict, total=False):
    name: Required[str]
    start: Required[str]
    nodes: Required[list[dict[str, Any]]]
    description: str
    state: dict[str, dict[str, Any]]
    metadata: dict[str, str]


class WorkflowUpdateParams(TypedDict, total=False):
    name: str
    start: str
    nodes: list[dict[str, Any]]
    description: str
    state: dict[str, dict[str, Any]]
    metadata: dict[str, str]


class MessageCreateParams(TypedDict, total=False):
    content: Required[str]
    role: Literal["user", "assistant"]


class ThreadCreateParams(TypedDict, total=False):
    messages: list[MessageCreateParams]
    metadata: dict[str, str]


class RunCreateParams(TypedDict, total=False):
    agent_id: Required[str]
    agent_version: int
    multitask_strategy: Literal["reject", "enqueue", "interrupt"]
    metadata: dict[str, str]


class ThreadAndRunParams(RunCreateParams, total=False):
    thread: ThreadCreateParams


class ToolOutput(TypedDict):
    tool_call_id: str
    output: str


class ApprovalDecision(TypedDict):
    tool_call_id: str
    approve: bool


class ApiKeyCreateParams(TypedDict, total=False):
    name: str
    role: Role
    expires_at: datetime | str


class BudgetSetParams(TypedDict, total=False):
    limit_minor: Required[int]
    currency: str
    scope: Literal["tenant", "api_key", "agent", "workflow"]
    scope_id: str
    hard: bool


class UsageParams(TypedDict, total=False):
    start_time: int
    """Window start, Unix seconds (inclusive); default: the start of the month."""
    end_time: int
    bucket_width: Literal["1h", "1d"]
    group_by: list[Literal["agent_id", "workflow_id", "api_key_id", "model", "instance_type"]]


class TenantCreateParams(TypedDict, total=False):
    name: Required[str]
    owner_email: str


class RateCardCreateParams(TypedDict, total=False):
    instance_type: Required[str]
    price_per_chip_hour: Required[str]
    currency: str
    model: str
    tenant_tier: str
    effective_from: datetime | str
    source: str


class CreditGrantParams(TypedDict, total=False):
    amount_minor: Required[int]
    reason: Required[str]
    currency: str
