"""``create_app(settings)``: the Litestar application, composed from the domain routers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.datastructures import State
from litestar.middleware import DefineMiddleware

from switchyard.accelerator.pool.heap import freeze_startup_heap, thaw_startup_heap
from switchyard.platform.agent_registry.controllers import AgentController
from switchyard.platform.api_keys.controllers import ApiKeyController
from switchyard.platform.audit.controllers import AuditLogController, OperatorAuditLogController
from switchyard.platform.auth.key_cache import KeyCache
from switchyard.platform.auth.last_use import KeyUseRecorder
from switchyard.platform.auth.middleware import ApiKeyAuthentication
from switchyard.platform.billing.controllers import (
    BudgetController,
    CreditAdminController,
    InvoiceController,
    RateCardAdminController,
    UsageController,
)
from switchyard.platform.console import console_router
from switchyard.platform.db import Database
from switchyard.platform.deps import dependencies
from switchyard.platform.health.controllers import healthz, readyz
from switchyard.platform.http.allow import list_allowed_methods
from switchyard.platform.http.bodies import ValidateAsDeclared
from switchyard.platform.http.body_timeout import BodyReadTimeout
from switchyard.platform.http.errors import exception_handlers
from switchyard.platform.http.json_body import JsonBodyRequest
from switchyard.platform.http.loop_turns import TakeLoopTurns, Turns
from switchyard.platform.http.openapi import ApiContract
from switchyard.platform.http.request_checks import check_request
from switchyard.platform.http.request_id import add_request_id_header
from switchyard.platform.idempotency import IdempotencyMiddleware
from switchyard.platform.identity.passwords import configure_password_hashing
from switchyard.platform.inference.controllers import ChatController, FleetController, ModelController
from switchyard.platform.inference.embeddings import EmbeddingController
from switchyard.platform.inference.runtime import start_gateway, stop_gateway
from switchyard.platform.inference.text_completions import TextCompletionController
from switchyard.platform.jobs import close_jobs
from switchyard.platform.knowledge.files.controllers import file_routes
from switchyard.platform.knowledge.search.controllers import VectorStoreSearchController
from switchyard.platform.knowledge.vector_stores.controllers import VectorStoreController, VectorStoreFileController
from switchyard.platform.members.controllers import MemberController
from switchyard.platform.observability import Observability
from switchyard.platform.responses.controllers import ConversationController, ResponseController
from switchyard.platform.responses.input_tokens import InputTokensController
from switchyard.platform.runs.controllers import RunController, ThreadAndRunController
from switchyard.platform.runs.dispatch import drain_inline_runs
from switchyard.platform.settings import Settings, argon2_cost, load_settings
from switchyard.platform.tenants.controllers import TenantAdminController
from switchyard.platform.threads.controllers import ThreadController
from switchyard.platform.tool_secrets import configure_secrets_key
from switchyard.platform.workflows.controllers import WorkflowController

__all__ = ["create_app"]

VERSION = "0.1.0"


def create_app(settings: Settings | None = None) -> Litestar:
    settings = settings or load_settings()
    configure_password_hashing(*argon2_cost(settings.password_hash))
    configure_secrets_key(settings)  # MCP headers are sealed in the database and opened to connect

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        if settings.uses_sqlite:
            settings.ensure_data_dir()
        app.state.database = Database(settings.database_url)
        app.state.key_cache = KeyCache(settings.auth_cache_seconds, app.state.database)
        app.state.key_uses = KeyUseRecorder(app.state.database)
        await start_gateway(app.state, settings, app.state.database)
        freeze_startup_heap()  # full collections then walk only what requests allocate (a schema bomb's dicts)
        try:
            yield
        finally:
            await drain_inline_runs(app.state)
            await app.state.key_uses.drain()
            await app.state.key_cache.drain()
            await stop_gateway(app.state)
            await asyncio.to_thread(close_jobs, app.state)
            await app.state.database.dispose()
            thaw_startup_heap()

    return Litestar(
        route_handlers=[
            healthz,
            readyz,
            TenantAdminController,
            ApiKeyController,
            MemberController,
            AuditLogController,
            OperatorAuditLogController,
            RateCardAdminController,
            BudgetController,
            CreditAdminController,
            InvoiceController,
            UsageController,
            ModelController,
            ChatController,
            TextCompletionController,
            EmbeddingController,
            VectorStoreSearchController,
            ResponseController,
            InputTokensController,
            ConversationController,
            FleetController,
            AgentController,
            WorkflowController,
            file_routes(settings),  # uploads alone take bodies up to SWITCHYARD_MAX_FILE_BYTES
            VectorStoreController,
            VectorStoreFileController,
            ThreadController,
            RunController,
            ThreadAndRunController,
            console_router,
        ],
        dependencies=dependencies(),
        middleware=[
            BodyReadTimeout(settings.request_body_timeout_seconds),  # outermost: it bounds every reader of the body
            DefineMiddleware(ApiKeyAuthentication, exclude=["^/schema"]),
            TakeLoopTurns(),  # after authentication, which names the tenant
            IdempotencyMiddleware(),
        ],
        exception_handlers=exception_handlers,
        request_class=JsonBodyRequest,
        before_request=check_request,
        before_send=[add_request_id_header, list_allowed_methods],
        request_max_body_size=settings.max_request_body_bytes,
        lifespan=[lifespan],
        state=State({"settings": settings, "loop_turns": Turns(settings.tenant_loop_turns)}),
        plugins=[
            Observability(log_level=settings.log_level, otlp_endpoint=settings.otlp_endpoint),  # also JSON logs
            ValidateAsDeclared(),
            ApiContract(
                title="Switchyard",
                version=VERSION,
                description="Multi-tenant agent hosting on a simulated AWS Trainium fleet, billed by compute used.",
            ),
        ],
        debug=False,
    )
