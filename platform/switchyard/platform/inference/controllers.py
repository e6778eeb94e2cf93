"""``/v1/models`` and ``/v1/chat/completions`` (OpenAI wire format), ``/v1/admin/fleet`` for operators."""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, JSONBody
from litestar.response import Stream

from switchyard.accelerator.errors import SimulatorError
from switchyard.accelerator.pool import Backend, ComputeReceipt, TextDelta, ToolCallDelta, UpstreamError
from switchyard.platform.admission import model_backend, served_models
from switchyard.platform.audit.service import record_operator
from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.billing.errors import BudgetExceeded
from switchyard.platform.deps import CurrentActor, CurrentPrincipal, CurrentTenant, DbSession
from switchyard.platform.http.errors import (
    ApiError,
    ErrorEnvelope,
    InvalidRequest,
    NotFound,
    RateLimited,
    ServiceUnavailable,
)
from switchyard.platform.http.openapi import answers
from switchyard.platform.inference.completions import (
    AnswerText,
    chunk,
    completion_object,
    compute_headers,
    sse,
    text_chunk,
    tool_call_deltas,
)
from switchyard.platform.inference.gateway import Admitted, InferenceGateway, RequestEvents
from switchyard.platform.inference.runtime import build_pool, reload_pool
from switchyard.platform.inference.schemas import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionCreate,
    ModelList,
    ModelPublic,
)

__all__ = ["ChatController", "FleetController", "ModelController"]


def _gateway(request: Request[Any, Any, Any]) -> InferenceGateway:
    gateway: InferenceGateway = request.app.state.gateway
    return gateway


def _model_public(backend: Backend, created: int, model_id: str) -> ModelPublic:
    return ModelPublic(
        id=model_id,
        created=created,
        owned_by="switchyard",
        backend=backend.spec.backend,
        instance_type=backend.spec.instance,
        context_window=backend.context_window,
        task=backend.spec.task,
    )


class ModelController(Controller):
    path = "/v1/models"
    tags = ["Inference"]
    guards = [require_access]

    @get(opt=access(Role.VIEWER), summary="List models")
    async def list_models(self, request: Request[Any, Any, Any], tenant: CurrentTenant) -> ModelList:
        """The models the caller's tenant may use: each served name, followed by its aliases as entries of their own
        (an alias answers exactly as the name does)."""
        created = int(request.app.state.started_at)
        pool = _gateway(request).pool
        backends = served_models(pool, tenant.tenant_id)
        return ModelList(
            data=[_model_public(b, created, name) for b in backends for name in (b.name, *pool.aliases(b.name))]
        )

    @get("/{model_id:path}", opt=access(Role.VIEWER), summary="Get a model")
    async def get_model(
        self, request: Request[Any, Any, Any], tenant: CurrentTenant, model_id: FromPath[str]
    ) -> ModelPublic:
        """One model, by served name or alias (its `id` is the one asked for), if the caller's tenant may use it."""
        model = model_id.lstrip("/")
        backend = model_backend(_gateway(request).pool, model, tenant.tenant_id)
        return _model_public(backend, int(request.app.state.started_at), model)


class ChatController(Controller):
    path = "/v1/chat/completions"
    tags = ["Inference"]
    guards = [require_access]

    @post(
        opt=access(Role.DEVELOPER),
        summary="Create a chat completion",
        status_code=200,
        raises=[NotFound, BudgetExceeded, RateLimited],
        responses=answers(
            200,
            "The completion; with `stream: true` its chunks as server-sent events, ending with `[DONE]`.",
            {"application/json": ChatCompletion, "text/event-stream": ChatCompletionChunk | ErrorEnvelope},
        ),
    )
    async def create_chat_completion(
        self, request: Request[Any, Any, Any], principal: CurrentPrincipal, data: JSONBody[ChatCompletionCreate]
    ) -> Response[Any]:
        """Run a chat completion on the fleet (OpenAI-compatible; `stream: true` answers with server-sent events).

        `usage.compute` reports the chip-microseconds attributed to the request and its simulated timings.
        With `logprobs: true` the answer carries its tokens' log probabilities (`choices[].logprobs`).
        """
        gateway = _gateway(request)
        # always ours: a client's x-request-id may repeat, and the completion id keys the request's one usage event
        completion_id = f"chatcmpl-{secrets.token_hex(12)}"
        admitted = await gateway.admit(principal=principal, body=data, request_id=completion_id)
        events = gateway.run(admitted)
        created = int(time.time())
        logprobs = data.logprobs is True
        if data.stream:
            include_usage = bool(data.stream_options and data.stream_options.include_usage)
            stream = _stream(gateway, admitted, events, completion_id, created, include_usage, logprobs)
            return Stream(
                stream, media_type="text/event-stream", headers=admitted.headers | {"cache-control": "no-cache"}
            )
        answer = AnswerText()
        receipt: ComputeReceipt | None = None
        async for event in events:
            if isinstance(event, TextDelta):
                answer.add(event)
            elif isinstance(event, ComputeReceipt):
                receipt = event
        assert receipt is not None
        body = completion_object(
            completion_id=completion_id,
            created=created,
            model=admitted.backend.name,
            answer=answer,
            receipt=receipt,
            logprobs=logprobs,
        )
        return Response(body, headers=admitted.headers | compute_headers(receipt))


async def _stream(
    gateway: InferenceGateway,
    admitted: Admitted,
    events: RequestEvents,
    completion_id: str,
    created: int,
    include_usage: bool,
    logprobs: bool = False,
) -> AsyncIterator[bytes]:
    model = admitted.backend.name
    finished = False
    try:
        opening = {"role": "assistant", "content": "", "refusal": None}
        none_yet: dict[str, Any] | None = {"content": [], "refusal": None} if logprobs else None
        yield sse(chunk(completion_id, created, model, opening, None, none_yet))
        async for event in events:
            if isinstance(event, TextDelta):
                yield sse(text_chunk(completion_id, created, model, event, logprobs))
            elif isinstance(event, ToolCallDelta):
                for delta in tool_call_deltas(event.index, event.call):
                    yield sse(chunk(completion_id, created, model, delta, None))
            elif isinstance(event, ComputeReceipt):
                yield sse(chunk(completion_id, created, model, {}, event.finish_reason))
                if include_usage:
                    usage = {
                        **chunk(completion_id, created, model, {}, None),
                        "choices": [],
                        "usage": event.usage(),
                    }
                    yield sse(usage)
        finished = True
    except ApiError as exc:
        finished = True
        yield sse({"error": {"message": exc.message, "type": exc.error_type, "param": exc.param, "code": exc.code}})
    finally:
        if not finished:  # the client disconnected mid-stream
            gateway.cancel(admitted)
    yield sse("[DONE]")


NODE = f"{socket.gethostname()}:{os.getpid()}"  # the API process whose fleet was reloaded


async def _fleet_status(request: Request[Any, Any, Any]) -> list[dict[str, Any]]:
    try:
        return await _gateway(request).status()
    except UpstreamError as exc:
        raise ServiceUnavailable(str(exc), code="fleet_unavailable") from None


class FleetController(Controller):
    path = "/v1/admin/fleet"
    tags = ["Operator: fleet"]
    guards = [require_access]

    @get(opt=access("operator"), summary="Fleet status")
    async def get_fleet(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        """Every served model: backend, instance type, replicas with utilisation, queue depth and KV usage."""
        return {"object": "fleet", "deployments": await _fleet_status(request)}

    @post("/reload", opt=access("operator"), summary="Reload the fleet", status_code=200)
    async def reload_fleet(
        self, request: Request[Any, Any, Any], db_session: DbSession, actor: CurrentActor
    ) -> dict[str, Any]:
        """Re-read the fleet file and serve from the new fleet; running requests finish on the old one."""
        settings = request.app.state.settings
        try:
            pool = build_pool(settings)
        except SimulatorError as exc:
            raise InvalidRequest(f"fleet file rejected, nothing changed: {exc}", code="invalid_fleet") from None
        try:
            await reload_pool(request.app.state, pool)
        except (SimulatorError, UpstreamError) as exc:
            await pool.aclose()
            if isinstance(exc, UpstreamError):
                raise ServiceUnavailable(str(exc), code="fleet_unavailable") from None
            raise InvalidRequest(f"fleet file rejected, nothing changed: {exc}", code="invalid_fleet") from None
        deployments = await _fleet_status(request)
        record_operator(
            db_session,
            actor=actor,
            action="fleet.reload",
            target_type="fleet",
            target_id=NODE,
            details={"fleet_file": str(settings.fleet_file or ""), "deployments": [b.name for b in pool.backends()]},
        )
        return {"object": "fleet", "deployments": deployments}
