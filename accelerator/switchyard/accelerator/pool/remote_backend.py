"""A ``trainium-sim`` deployment simulated by a fleet process (``switchyard fleet``), reached over HTTP.

A simulated fleet is state: each deployment must run in exactly one process, or N processes would simulate N
copies of its replicas. API processes and workers therefore send their requests to the fleet process as a
gateway sends them to real Neuron servers: OpenAI chat completions, streamed, plus the request's identity in a
``switchyard`` field; the last chunk's ``usage.compute`` is the simulated replica's exact compute receipt. The
fleet process records the replicas' busy time. Context window and budget bounds are pure functions of the
deployment, computed here without a round trip.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

import httpx

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.pool.embeddings import EmbeddingRequest
from switchyard.accelerator.pool.fleet import DeploymentSpec, simulated_deployment
from switchyard.accelerator.pool.sim_backend import compute_bound
from switchyard.accelerator.pool.types import ComputeReceipt, InferenceRequest
from switchyard.accelerator.pool.upstream_backend import (
    UpstreamDeployment,
    UpstreamError,
    _Answer,
    reported_cached_tokens,
)

__all__ = ["RemoteSimulatedDeployment", "reload_fleet_process"]

log = logging.getLogger(__name__)


class RemoteSimulatedDeployment(UpstreamDeployment):
    """The client side of one simulated deployment served by the fleet process at ``fleet_url``.

    The simulator takes ``max_tokens`` as the length to generate, so a request's ``output_ceiling`` goes in the
    ``switchyard`` field instead; an answer that passes it anyway is cut here, the request stopped on the fleet,
    and its stream read on to the compute receipt of what the fleet did."""

    _asks_for_ceiling = False

    def __init__(
        self,
        spec: DeploymentSpec,
        *,
        fleet_url: str,
        token: str = "",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = fleet_url.rstrip("/")
        super().__init__(replace(spec, base_url=base + "/v1", api_key=token), transport=transport)
        self.spec = spec  # callers see the trainium-sim spec; the fleet's address is ours alone
        self.deployment = simulated_deployment(spec)
        self._compute_bound = compute_bound(self.deployment, spec)
        self._fleet = base
        self._cancels: set[asyncio.Task[None]] = set()

    @property
    def context_window(self) -> int:
        return int(self.deployment.model.max_position_embeddings)

    def max_chip_us(self, prompt_tokens: int, output_tokens: int) -> int:
        return self._compute_bound(prompt_tokens, output_tokens)

    def busy_chip_us(self) -> dict[str, tuple[str, int]]:
        """Nothing: the fleet process records its replicas' busy time and receipts."""
        return {}

    def take_receipts(self) -> list[tuple[ComputeReceipt, float]]:
        return []

    def _record(self, receipt: ComputeReceipt) -> None:
        pass

    def _body(self, request: InferenceRequest) -> dict[str, Any]:
        body = super()._body(request)
        body["model"] = self.spec.name
        body["switchyard"] = {
            "request_id": request.request_id,
            "tenant": request.tenant,
            "priority": int(request.priority),
            "weight": request.weight,
            "session": request.session,
            "output_ceiling": request.output_ceiling,
        }
        return body

    def _read_past_cut(self, request: InferenceRequest) -> bool:
        self.cancel(request.request_id)
        return True

    def _compute_deadline(self, request: InferenceRequest | EmbeddingRequest, started: float) -> float | None:
        """None: the fleet's receipt, not our clock, is the compute, and the simulator never passes the ceiling (a
        hold is its batch-1 bound, and a batched request shares its iterations)."""
        return None

    def _receipt(self, request: InferenceRequest, answer: _Answer, started: float, finished: float) -> ComputeReceipt:
        compute = answer.usage.get("compute")
        if not isinstance(compute, dict):
            raise UpstreamError(f"the fleet process sent no compute receipt for {request.request_id!r}")
        return ComputeReceipt(
            tenant=request.tenant,
            request_id=request.request_id,
            model=self.spec.name,
            instance_type=str(compute["instance_type"]),
            replica=str(compute["replica"]),
            chip_us=int(compute["chip_us"]),
            prompt_tokens=int(answer.usage["prompt_tokens"]),
            cached_tokens=reported_cached_tokens(answer.usage),
            cache_saved_chip_us=int(compute.get("cache_saved_chip_us", 0)),
            completion_tokens=answer.completion_tokens(),
            queue_ms=float(compute["queue_ms"]),
            ttft_ms=float(compute["ttft_ms"]),
            decode_ms=float(compute["decode_ms"]),
            finish_reason=answer.finish_reason,
            tool_calls=answer.tool_calls(),
        )

    def _embedding_body(self, request: EmbeddingRequest) -> dict[str, Any]:
        body = super()._embedding_body(request)
        body["model"] = self.spec.name
        body["switchyard"] = {
            "request_id": request.request_id,
            "tenant": request.tenant,
            "priority": int(request.priority),
            "weight": request.weight,
        }
        return body

    def _embedding_receipt(
        self, request: EmbeddingRequest, usage: dict[str, Any], started: float, finished: float
    ) -> ComputeReceipt:
        compute = usage.get("compute")
        if not isinstance(compute, dict):
            raise UpstreamError(f"the fleet process sent no compute receipt for {request.request_id!r}")
        return ComputeReceipt(
            tenant=request.tenant,
            request_id=request.request_id,
            model=self.spec.name,
            instance_type=str(compute["instance_type"]),
            replica=str(compute["replica"]),
            chip_us=int(compute["chip_us"]),
            prompt_tokens=int(usage["prompt_tokens"]),
            completion_tokens=0,
            queue_ms=float(compute["queue_ms"]),
            ttft_ms=float(compute["ttft_ms"]),
            decode_ms=float(compute["decode_ms"]),
            finish_reason="stop",
        )

    def cancel(self, request_id: str) -> None:
        """Ask the fleet to stop the request; its answer goes on to the receipt of the compute used so far."""
        task = asyncio.get_running_loop().create_task(self._cancel(request_id))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel(self, request_id: str) -> None:
        try:
            response = await self._transport.handle_async_request(
                httpx.Request("POST", f"{self._fleet}/v1/requests/{request_id}/cancel", headers=self._headers)
            )
            await response.aclose()
        except httpx.HTTPError:  # the fleet stops the request anyway when our connection closes
            log.warning("could not cancel %s on the fleet process", request_id, exc_info=True)

    async def status(self) -> dict[str, Any]:
        """The deployment's status as the fleet process reports it."""
        try:
            response = await self._transport.handle_async_request(
                httpx.Request("GET", f"{self._fleet}/v1/fleet", headers=self._headers)
            )
            await response.aread()
            await response.aclose()
            deployments = response.json()["deployments"]
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise UpstreamError(f"the fleet process at {self._fleet} did not answer: {exc!r}") from exc
        for deployment in deployments:
            if deployment.get("model") == self.spec.name:
                return dict(deployment)
        raise UpstreamError(f"the fleet process at {self._fleet} does not serve {self.spec.name!r}")

    async def aclose(self) -> None:
        if self._cancels:
            await asyncio.gather(*self._cancels, return_exceptions=True)
        await super().aclose()


async def reload_fleet_process(fleet_url: str, token: str = "") -> None:
    """Ask the fleet process to re-read its fleet file; raises ``ConfigurationError`` when it rejects the file,
    ``UpstreamError`` when it cannot be reached."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        async with httpx.AsyncClient(timeout=60.0) as client:
            response = await client.post(f"{fleet_url.rstrip('/')}/v1/fleet/reload", headers=headers)
    except httpx.HTTPError as exc:
        raise UpstreamError(f"the fleet process at {fleet_url} did not answer: {exc!r}") from exc
    if response.status_code == 400:
        raise ConfigurationError(response.json()["error"]["message"])
    if response.status_code != 200:
        raise UpstreamError(f"the fleet process answered {response.status_code}: {response.text[:500]}")
