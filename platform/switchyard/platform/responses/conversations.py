"""Conversations and their items: created empty or with items, listed by position, items added and removed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.errors import NotFound
from switchyard.platform.models import Conversation, ConversationItem
from switchyard.platform.responses.items import check_items
from switchyard.platform.responses.schemas import ConversationCreate
from switchyard.platform.responses.store import add_conversation_items, conversation_row

__all__ = ["add_items", "create", "get", "item_page", "item_row", "list_items"]

get = conversation_row


async def create(session: AsyncSession, scope: TenantScope, data: ConversationCreate) -> Conversation:
    row = Conversation(id=new_id("conv"), tenant_id=scope.tenant_id, metadata_json=dict(data.metadata or {}))
    session.add(row)
    if data.items:
        await session.flush()
        await add_items(session, scope, row.id, data.items)
    return row


async def add_items(
    session: AsyncSession, scope: TenantScope, conversation_id: str, items: Sequence[Any]
) -> list[dict[str, Any]]:
    checked = check_items(items, param="items")
    await add_conversation_items(session, scope, conversation_id, checked)
    return checked


async def item_row(session: AsyncSession, scope: TenantScope, conversation_id: str, item_id: str) -> ConversationItem:
    statement = select(ConversationItem).where(
        col(ConversationItem.tenant_id) == scope.tenant_id,
        col(ConversationItem.conversation_id) == conversation_id,
        col(ConversationItem.id) == item_id,
    )
    row = (await session.execute(statement.limit(1))).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no item {item_id!r} in conversation {conversation_id!r}", param="item_id")
    return row


async def list_items(
    session: AsyncSession, scope: TenantScope, conversation_id: str, *, after: str | None, limit: int, order: str
) -> dict[str, Any]:
    statement = select(ConversationItem).where(
        col(ConversationItem.tenant_id) == scope.tenant_id, col(ConversationItem.conversation_id) == conversation_id
    )
    if after is not None:
        cursor = await item_row(session, scope, conversation_id, after)
        position = col(ConversationItem.position)
        statement = statement.where(position < cursor.position if order == "desc" else position > cursor.position)
    ordering = col(ConversationItem.position).desc() if order == "desc" else col(ConversationItem.position).asc()
    rows = (await session.execute(statement.order_by(ordering).limit(limit + 1))).scalars().all()
    return _page([dict(row.item) for row in rows[:limit]], has_more=len(rows) > limit)


def item_page(items: Sequence[dict[str, Any]], *, after: str | None, limit: int) -> dict[str, Any]:
    """One page of ``items`` (already in display order) after the item ``after``."""
    start = 0
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise NotFound(f"no item {after!r}", param="after", code="unknown_cursor")
        start = ids.index(after) + 1
    page = list(items[start : start + limit])
    return _page(page, has_more=start + limit < len(items))


def _page(data: list[dict[str, Any]], *, has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
