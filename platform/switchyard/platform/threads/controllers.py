from __future__ import annotations

from litestar import Controller, delete, get, post
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentActor, CurrentTenant, DbSession, PageParams
from switchyard.platform.http.errors import Conflict
from switchyard.platform.http.pagination import Page
from switchyard.platform.threads import service
from switchyard.platform.threads.schemas import MessageCreate, MessagePublic, ThreadCreate, ThreadDeleted, ThreadPublic

__all__ = ["ThreadController"]


class ThreadController(Controller):
    path = "/v1/threads"
    tags = ["Threads"]
    guards = [require_access]

    @post(opt=access(Role.DEVELOPER), summary="Create a thread")
    async def create_thread(
        self, db_session: DbSession, tenant: CurrentTenant, actor: CurrentActor, data: JSONBody[ThreadCreate]
    ) -> ThreadPublic:
        return await service.create_thread(db_session, scope=tenant, actor=actor, data=data)

    @get("/{thread_id:str}", opt=access(Role.VIEWER), summary="Get a thread")
    async def get_thread(self, db_session: DbSession, tenant: CurrentTenant, thread_id: FromPath[str]) -> ThreadPublic:
        return await service.get_thread(db_session, scope=tenant, thread_id=thread_id)

    @delete(
        "/{thread_id:str}",
        opt=access(Role.DEVELOPER),
        status_code=HTTP_200_OK,
        summary="Delete a thread",
        raises=[Conflict],
    )
    async def delete_thread(
        self, db_session: DbSession, tenant: CurrentTenant, actor: CurrentActor, thread_id: FromPath[str]
    ) -> ThreadDeleted:
        """Hide the thread (409 while a run on it is active)."""
        return await service.delete_thread(db_session, scope=tenant, actor=actor, thread_id=thread_id)

    @post("/{thread_id:str}/messages", opt=access(Role.DEVELOPER), summary="Add a message to a thread")
    async def create_message(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        thread_id: FromPath[str],
        data: JSONBody[MessageCreate],
    ) -> MessagePublic:
        """Append a message (409 while a run on the thread is active)."""
        return await service.add_message(db_session, scope=tenant, actor=actor, thread_id=thread_id, data=data)

    @get("/{thread_id:str}/messages", opt=access(Role.VIEWER), summary="List a thread's messages")
    async def list_messages(
        self, db_session: DbSession, tenant: CurrentTenant, thread_id: FromPath[str], page: PageParams
    ) -> Page[MessagePublic]:
        return await service.list_messages(db_session, scope=tenant, thread_id=thread_id, params=page)
