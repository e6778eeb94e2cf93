"""Threads and their messages. Messages are ordered by ``position``; runs append theirs as they appear."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.agents import Message
from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.db.positions import take_positions
from switchyard.platform.http.errors import Conflict, NotFound
from switchyard.platform.http.pagination import CursorParams, Page, unknown_cursor
from switchyard.platform.models import Run, Thread, ThreadMessage, utc_now
from switchyard.platform.threads.schemas import (
    ACTIVE_RUN_STATUSES,
    MessageCreate,
    MessagePublic,
    ThreadCreate,
    ThreadDeleted,
    ThreadPublic,
)

__all__ = [
    "active_run_id",
    "add_message",
    "append_messages",
    "create_thread",
    "delete_thread",
    "get_thread",
    "history",
    "list_messages",
    "thread_row",
]


async def thread_row(session: AsyncSession, scope: TenantScope, thread_id: str) -> Thread:
    statement = select(Thread).where(col(Thread.tenant_id) == scope.tenant_id, col(Thread.id) == thread_id)
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None or row.deleted_at is not None:
        raise NotFound(f"no thread {thread_id!r}", param="thread_id")
    return row


async def active_run_id(session: AsyncSession, scope: TenantScope, thread_id: str) -> str | None:
    statement = select(col(Run.id)).where(
        col(Run.tenant_id) == scope.tenant_id,
        col(Run.thread_id) == thread_id,
        col(Run.status).in_(ACTIVE_RUN_STATUSES),
    )
    return (await session.execute(statement.limit(1))).scalar_one_or_none()


async def append_messages(
    session: AsyncSession,
    *,
    scope: TenantScope,
    thread_id: str,
    messages: Sequence[Message],
    run_id: str | None = None,
) -> list[ThreadMessage]:
    """Append ``messages`` after the thread's last one, concurrent appends included (ids kept when the message has
    one)."""
    first = await take_positions(session, Thread, scope=scope, owner_id=thread_id, count=len(messages))
    rows = []
    for position, message in enumerate(messages, start=first):
        row = ThreadMessage(
            id=message.id or new_id("msg"),
            tenant_id=scope.tenant_id,
            thread_id=thread_id,
            run_id=run_id,
            position=position,
            role=message.role,
            content=message.content,
            tool_calls=[call.to_openai() for call in message.tool_calls],
            tool_call_id=message.tool_call_id,
        )
        session.add(row)
        rows.append(row)
    return rows


async def history(session: AsyncSession, *, scope: TenantScope, thread_id: str, up_to_position: int) -> list[Message]:
    """The thread's messages up to ``up_to_position`` (inclusive), oldest first, as run-loop messages."""
    statement = (
        select(ThreadMessage)
        .where(
            col(ThreadMessage.tenant_id) == scope.tenant_id,
            col(ThreadMessage.thread_id) == thread_id,
            col(ThreadMessage.position) <= up_to_position,
        )
        .order_by(col(ThreadMessage.position))
    )
    rows = (await session.execute(statement)).scalars().all()
    out = []
    for row in rows:
        calls = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in row.tool_calls or []
        ]
        out.append(
            Message.model_validate(
                {
                    "id": row.id,
                    "role": row.role,
                    "content": row.content,
                    "tool_calls": calls,
                    "tool_call_id": row.tool_call_id,
                }
            )
        )
    return out


async def create_thread(session: AsyncSession, *, scope: TenantScope, actor: Actor, data: ThreadCreate) -> ThreadPublic:
    thread = Thread(id=new_id("thread"), tenant_id=scope.tenant_id, metadata_json=dict(data.metadata))
    session.add(thread)
    await session.flush()
    await append_messages(
        session,
        scope=scope,
        thread_id=thread.id,
        messages=[Message(role=m.role, content=m.content) for m in data.messages],
    )
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="thread.create",
        target_type="thread",
        target_id=thread.id,
    )
    await session.flush()
    return ThreadPublic.of(thread)


async def get_thread(session: AsyncSession, *, scope: TenantScope, thread_id: str) -> ThreadPublic:
    return ThreadPublic.of(await thread_row(session, scope, thread_id))


async def delete_thread(session: AsyncSession, *, scope: TenantScope, actor: Actor, thread_id: str) -> ThreadDeleted:
    thread = await thread_row(session, scope, thread_id)
    running = await active_run_id(session, scope, thread_id)
    if running is not None:
        raise Conflict(f"thread has an active run {running!r}; cancel it first", code="thread_has_active_run")
    thread.deleted_at = utc_now()
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="thread.delete",
        target_type="thread",
        target_id=thread_id,
    )
    await session.flush()
    return ThreadDeleted(id=thread_id)


async def add_message(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, thread_id: str, data: MessageCreate
) -> MessagePublic:
    await thread_row(session, scope, thread_id)
    running = await active_run_id(session, scope, thread_id)
    if running is not None:
        raise Conflict(f"thread has an active run {running!r}", code="thread_has_active_run")
    [row] = await append_messages(
        session, scope=scope, thread_id=thread_id, messages=[Message(role=data.role, content=data.content)]
    )
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="thread.message.create",
        target_type="thread",
        target_id=thread_id,
        details={"message_id": row.id},
    )
    await session.flush()
    return MessagePublic.of(row)


async def list_messages(
    session: AsyncSession, *, scope: TenantScope, thread_id: str, params: CursorParams
) -> Page[MessagePublic]:
    """Messages in thread order (``order`` asc or desc); ``after``/``before`` are message ids."""
    await thread_row(session, scope, thread_id)
    base = select(ThreadMessage).where(
        col(ThreadMessage.tenant_id) == scope.tenant_id, col(ThreadMessage.thread_id) == thread_id
    )

    async def position_of(param: str, message_id: str) -> int:
        found = (await session.execute(base.where(col(ThreadMessage.id) == message_id))).scalar_one_or_none()
        if found is None:
            raise unknown_cursor(param, message_id)
        return found.position

    descending = params.order == "desc"
    statement = base
    if params.after is not None:
        pos = await position_of("after", params.after)
        statement = statement.where(
            col(ThreadMessage.position) < pos if descending else col(ThreadMessage.position) > pos
        )
    if params.before is not None:
        pos = await position_of("before", params.before)
        statement = statement.where(
            col(ThreadMessage.position) > pos if descending else col(ThreadMessage.position) < pos
        )
    backwards = params.before is not None and params.after is None
    ascending = descending == backwards
    column = col(ThreadMessage.position)
    statement = statement.order_by(column.asc() if ascending else column.desc()).limit(params.limit + 1)
    rows = list((await session.execute(statement)).scalars().all())
    has_more = len(rows) > params.limit
    rows = rows[: params.limit]
    if backwards:
        rows.reverse()
    return Page[MessagePublic](
        data=[MessagePublic.of(r) for r in rows],
        first_id=rows[0].id if rows else None,
        last_id=rows[-1].id if rows else None,
        has_more=has_more,
    )
