"""Reading and writing responses and conversations: rows, the items a response's history is made of, and the
items a response adds to its conversation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.db.positions import take_positions
from switchyard.platform.http.errors import NotFound
from switchyard.platform.models import Conversation, ConversationItem, ResponseRecord

__all__ = [
    "add_conversation_items",
    "chain_items",
    "conversation_items",
    "conversation_row",
    "response_row",
]

MAX_CHAIN = 1000
"""How many responses ``previous_response_id`` may reach back through."""


async def response_row(
    session: AsyncSession, scope: TenantScope, response_id: str, *, param: str = "response_id", stored_only: bool = True
) -> ResponseRecord:
    """A stored response of the tenant (an unstored one exists only for its books: 404, as another tenant's,
    unless ``stored_only`` is false: the request that created it answers with it)."""
    statement = select(ResponseRecord).where(
        col(ResponseRecord.tenant_id) == scope.tenant_id, col(ResponseRecord.id) == response_id
    )
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None or (stored_only and not row.stored):
        raise NotFound(f"no response {response_id!r}", param=param)
    return row


async def chain_items(session: AsyncSession, scope: TenantScope, previous: ResponseRecord) -> list[dict[str, Any]]:
    """The items of ``previous`` and every response before it: each one's input, then its output, oldest first. A
    deleted response ends the chain: neither it nor any response before it is read."""
    chain: list[ResponseRecord] = []
    row: ResponseRecord | None = previous
    while row is not None and row.stored and len(chain) < MAX_CHAIN:
        chain.append(row)
        if row.previous_response_id is None:
            break
        statement = select(ResponseRecord).where(
            col(ResponseRecord.tenant_id) == scope.tenant_id, col(ResponseRecord.id) == row.previous_response_id
        )
        row = (await session.execute(statement)).scalar_one_or_none()
    items: list[dict[str, Any]] = []
    for link in reversed(chain):
        items.extend(link.input_items)
        items.extend(link.output)
    return items


async def conversation_row(
    session: AsyncSession, scope: TenantScope, conversation_id: str, *, param: str = "conversation_id"
) -> Conversation:
    statement = select(Conversation).where(
        col(Conversation.tenant_id) == scope.tenant_id, col(Conversation.id) == conversation_id
    )
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None or row.deleted_at is not None:
        raise NotFound(f"no conversation {conversation_id!r}", param=param)
    return row


async def conversation_items(
    session: AsyncSession, scope: TenantScope, conversation_id: str, *, up_to: int | None = None
) -> list[dict[str, Any]]:
    """The conversation's items in order (those at positions up to ``up_to`` when given)."""
    statement = select(col(ConversationItem.item)).where(
        col(ConversationItem.tenant_id) == scope.tenant_id, col(ConversationItem.conversation_id) == conversation_id
    )
    if up_to is not None:
        statement = statement.where(col(ConversationItem.position) <= up_to)
    rows = await session.execute(statement.order_by(col(ConversationItem.position)))
    return [dict(item) for item in rows.scalars().all()]


async def add_conversation_items(
    session: AsyncSession,
    scope: TenantScope,
    conversation_id: str,
    items: Sequence[dict[str, Any]],
    *,
    response_id: str | None = None,
) -> None:
    """Append ``items`` to the conversation, after every item appended before (concurrent appends included)."""
    if not items:
        return
    first = await take_positions(session, Conversation, scope=scope, owner_id=conversation_id, count=len(items))
    for position, item in enumerate(items, start=first):
        session.add(
            ConversationItem(
                row_id=new_id("citm"),
                id=item["id"],
                tenant_id=scope.tenant_id,
                conversation_id=conversation_id,
                position=position,
                response_id=response_id,
                item=dict(item),
            )
        )
