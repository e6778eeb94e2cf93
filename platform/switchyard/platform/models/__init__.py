"""All tables, one per module; importing this package registers them on ``SQLModel.metadata``."""

from __future__ import annotations

from switchyard.platform.models.agent import Agent
from switchyard.platform.models.agent_version import AgentVersion
from switchyard.platform.models.api_key import ApiKey
from switchyard.platform.models.audit_event import AuditEvent
from switchyard.platform.models.base import TenantOwned, utc_now
from switchyard.platform.models.budget import Budget
from switchyard.platform.models.budget_alert import BudgetAlert
from switchyard.platform.models.budget_reservation import BudgetReservation
from switchyard.platform.models.console_session import ConsoleSession
from switchyard.platform.models.conversation import Conversation, ConversationItem
from switchyard.platform.models.credit import Credit
from switchyard.platform.models.fleet_busy import FleetBusy
from switchyard.platform.models.fleet_receipt import FleetReceipt
from switchyard.platform.models.idempotency_record import IdempotencyRecord
from switchyard.platform.models.invoice import Invoice
from switchyard.platform.models.invoice_line import InvoiceLine
from switchyard.platform.models.knowledge import (
    FileContent,
    KnowledgeChunk,
    StoredFile,
    VectorStore,
    VectorStoreFile,
    VectorStoreFileBatch,
)
from switchyard.platform.models.member import Member
from switchyard.platform.models.member_invitation import MemberInvitation
from switchyard.platform.models.member_password import MemberPassword
from switchyard.platform.models.member_password_reset import MemberPasswordReset
from switchyard.platform.models.operator_account import OperatorAccount, OperatorConsoleSession
from switchyard.platform.models.operator_audit_event import OperatorAuditEvent
from switchyard.platform.models.operator_key import OperatorKey
from switchyard.platform.models.rate_card import RateCard
from switchyard.platform.models.response import ResponseEventRecord, ResponseRecord
from switchyard.platform.models.run import Run
from switchyard.platform.models.run_event import RunEventRecord
from switchyard.platform.models.tenant import Tenant
from switchyard.platform.models.tenant_turn import TenantTurn
from switchyard.platform.models.thread import Thread
from switchyard.platform.models.thread_message import ThreadMessage
from switchyard.platform.models.usage_aggregate import UsageAggregate
from switchyard.platform.models.usage_event import UsageEvent

__all__ = [
    "Agent",
    "AgentVersion",
    "ApiKey",
    "AuditEvent",
    "Budget",
    "BudgetAlert",
    "BudgetReservation",
    "ConsoleSession",
    "Conversation",
    "ConversationItem",
    "Credit",
    "FileContent",
    "FleetBusy",
    "FleetReceipt",
    "IdempotencyRecord",
    "Invoice",
    "InvoiceLine",
    "KnowledgeChunk",
    "Member",
    "MemberInvitation",
    "MemberPassword",
    "MemberPasswordReset",
    "OperatorAccount",
    "OperatorAuditEvent",
    "OperatorConsoleSession",
    "OperatorKey",
    "RateCard",
    "ResponseEventRecord",
    "ResponseRecord",
    "Run",
    "RunEventRecord",
    "StoredFile",
    "Tenant",
    "TenantOwned",
    "TenantTurn",
    "Thread",
    "ThreadMessage",
    "UsageAggregate",
    "UsageEvent",
    "VectorStore",
    "VectorStoreFile",
    "VectorStoreFileBatch",
    "utc_now",
]
