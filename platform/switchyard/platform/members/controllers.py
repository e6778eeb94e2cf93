from __future__ import annotations

from litestar import Controller, delete, get, patch, post
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentActor, CurrentPrincipal, CurrentTenant, DbSession, PageParams
from switchyard.platform.http.errors import Conflict
from switchyard.platform.http.pagination import Page
from switchyard.platform.members import service
from switchyard.platform.members.schemas import MemberCreate, MemberDeleted, MemberPublic, MemberUpdate

__all__ = ["MemberController"]


class MemberController(Controller):
    path = "/v1/members"
    tags = ["Members"]
    guards = [require_access]

    @post(opt=access(Role.ADMIN), summary="Add a member")
    async def create_member(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        principal: CurrentPrincipal,
        data: JSONBody[MemberCreate],
    ) -> MemberPublic:
        """Add a person to the tenant with a role no higher than the caller's."""
        return await service.add_member(
            db_session,
            scope=tenant,
            actor=actor,
            actor_role=principal.tenant_role,
            email=data.email,
            role=data.role,
        )

    @get(opt=access(Role.VIEWER), summary="List members")
    async def list_members(self, db_session: DbSession, tenant: CurrentTenant, page: PageParams) -> Page[MemberPublic]:
        """The tenant's members, newest first."""
        return await service.list_members(db_session, scope=tenant, params=page)

    @get("/{member_id:str}", opt=access(Role.VIEWER), summary="Get a member")
    async def get_member(self, db_session: DbSession, tenant: CurrentTenant, member_id: FromPath[str]) -> MemberPublic:
        """One member of the tenant."""
        return await service.get_member(db_session, scope=tenant, member_id=member_id)

    @patch("/{member_id:str}", opt=access(Role.ADMIN), summary="Change a member's role", raises=[Conflict])
    async def update_member(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        principal: CurrentPrincipal,
        member_id: FromPath[str],
        data: JSONBody[MemberUpdate],
    ) -> MemberPublic:
        """Change a member's role; the last owner cannot be demoted."""
        return await service.change_role(
            db_session,
            scope=tenant,
            actor=actor,
            actor_role=principal.tenant_role,
            member_id=member_id,
            role=data.role,
        )

    @delete(
        "/{member_id:str}",
        opt=access(Role.ADMIN),
        status_code=HTTP_200_OK,
        summary="Remove a member",
        raises=[Conflict],
    )
    async def delete_member(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        principal: CurrentPrincipal,
        member_id: FromPath[str],
    ) -> MemberDeleted:
        """Remove a member; the last owner cannot be removed."""
        removed = await service.remove_member(
            db_session, scope=tenant, actor=actor, actor_role=principal.tenant_role, member_id=member_id
        )
        return MemberDeleted(id=removed)
