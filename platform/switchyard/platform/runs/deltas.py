"""``thread.message.delta`` events: the text of the model call in flight, stored in small batches.

The run loop records whole messages; the pool streams tokens. While a model call runs, its text is buffered
and stored every ``FLUSH_EVERY_S`` as ``thread.message.delta`` events (numbered like every other event), so
subscribers see the answer as it is produced. As in OpenAI's stream, a message is announced before its first
delta: ``thread.message.created`` and ``thread.message.in_progress`` (status ``in_progress``, no content yet)
come first, and the checkpoint that stores the whole message then adds only ``thread.message.completed``
(``announced`` holds the ids announced here). A model call repeated after a crash announces and streams its
message again (the message is stored once).
"""

from __future__ import annotations

import asyncio
import contextlib

from sqlalchemy import func, select
from sqlmodel import col

from switchyard.accelerator.pool import PoolEvent, TextDelta
from switchyard.agents import RunState, StepStatus, StepType
from switchyard.platform.db import Database, TenantScope, new_id
from switchyard.platform.models import RunEventRecord
from switchyard.platform.runs.persist import RunContext

__all__ = ["FLUSH_EVERY_S", "MessageDeltas"]

FLUSH_EVERY_S = 0.1


class MessageDeltas:
    """Buffers one run's streamed text; ``lock`` serialises its writes with the run's checkpoints."""

    def __init__(self, database: Database, scope: TenantScope, ctx: RunContext) -> None:
        self.database = database
        self.scope = scope
        self.ctx = ctx
        self.lock = asyncio.Lock()
        self._message_id: str | None = None
        self._buffer: list[str] = []
        self._flusher: asyncio.Task[None] | None = None
        self.announced: set[str] = set()

    def follow(self, state: RunState) -> None:
        """After each checkpoint: deltas belong to the model step now in progress (if any)."""
        open_calls = [s for s in state.steps if s.type is StepType.MODEL_CALL and s.status is StepStatus.IN_PROGRESS]
        self._message_id = f"msg_{open_calls[-1].id}" if open_calls else None

    def on_event(self, event: PoolEvent) -> None:
        if not isinstance(event, TextDelta) or self._message_id is None or not (event.text or event.refusal):
            return
        self._buffer.append(event.text or event.refusal)  # a refusal is the message's text, as PoolModel keeps it
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(FLUSH_EVERY_S)
        async with self.lock:
            await self.write_pending()

    async def write_pending(self) -> None:
        """Store the buffered text as one delta event; call with ``lock`` held."""
        if not self._buffer or self._message_id is None:
            self._buffer.clear()
            return
        text = "".join(self._buffer)
        self._buffer.clear()
        message_id = self._message_id
        events: list[tuple[str, dict[str, object]]] = []
        if message_id not in self.announced:
            opened: dict[str, object] = {
                "object": "thread.message",
                "id": message_id,
                "run_id": self.ctx.run_id,
                "thread_id": self.ctx.thread_id,
                "role": "assistant",
                "content": None,
                "status": "in_progress",
            }
            events += [("thread.message.created", opened), ("thread.message.in_progress", opened)]
        delta: dict[str, object] = {
            "object": "thread.message.delta",
            "id": message_id,
            "run_id": self.ctx.run_id,
            "thread_id": self.ctx.thread_id,
            "delta": {"content": text},
        }
        events.append(("thread.message.delta", delta))
        async with self.database.unit_of_work(self.scope) as session:
            last = (
                await session.execute(
                    select(func.max(col(RunEventRecord.sequence_number))).where(
                        col(RunEventRecord.tenant_id) == self.scope.tenant_id,
                        col(RunEventRecord.run_id) == self.ctx.run_id,
                    )
                )
            ).scalar_one_or_none() or 0
            for offset, (name, data) in enumerate(events, start=1):
                session.add(
                    RunEventRecord(
                        id=new_id("evt"),
                        tenant_id=self.scope.tenant_id,
                        run_id=self.ctx.run_id,
                        sequence_number=last + offset,
                        event=name,
                        data=data,
                    )
                )
        self.announced.add(message_id)

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
