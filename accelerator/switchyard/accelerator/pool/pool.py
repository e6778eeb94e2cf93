"""``AcceleratorPool.submit(InferenceRequest)`` → token events, then one ``ComputeReceipt``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from switchyard.accelerator.errors import UnknownNameError
from switchyard.accelerator.pool.embeddings import EmbeddingRequest, Embeddings
from switchyard.accelerator.pool.fleet import DeploymentSpec, model_aliases
from switchyard.accelerator.pool.remote_backend import RemoteSimulatedDeployment
from switchyard.accelerator.pool.sim_backend import SimulatedDeployment
from switchyard.accelerator.pool.types import ComputeReceipt, InferenceRequest, PoolEvent
from switchyard.accelerator.pool.upstream_backend import UpstreamDeployment

__all__ = ["AcceleratorPool", "Backend"]


class Backend(Protocol):
    """One served model: the simulator or an upstream server."""

    spec: DeploymentSpec

    @property
    def name(self) -> str: ...

    @property
    def context_window(self) -> int: ...

    def generate(self, request: InferenceRequest) -> AsyncIterator[PoolEvent]: ...

    def embed(self, request: EmbeddingRequest) -> AsyncIterator[Embeddings | ComputeReceipt]: ...

    def max_chip_us(self, prompt_tokens: int, output_tokens: int) -> int: ...

    def cancel(self, request_id: str) -> None: ...

    def busy_chip_us(self) -> dict[str, tuple[str, int]]: ...

    def take_receipts(self) -> list[tuple[ComputeReceipt, float]]: ...

    async def status(self) -> dict[str, Any]: ...


class AcceleratorPool:
    """Every served model of the fleet, by name or by alias (see :func:`model_aliases`)."""

    def __init__(self, backends: Iterable[Backend]) -> None:
        self._backends: dict[str, Backend] = {b.name: b for b in backends}
        self._aliases = model_aliases(b.spec for b in self._backends.values())

    @classmethod
    def from_specs(
        cls,
        specs: Iterable[DeploymentSpec],
        *,
        time_scale: float = 1.0,
        fleet_url: str | None = None,
        fleet_token: str = "",
    ) -> AcceleratorPool:
        """Backends for ``specs``. With ``fleet_url``, ``trainium-sim`` deployments are simulated by that fleet
        process (``switchyard fleet``) instead of in this process."""
        backends: list[Backend] = []
        for spec in specs:
            if spec.backend != "trainium-sim":
                backends.append(UpstreamDeployment(spec))
            elif fleet_url:
                backends.append(RemoteSimulatedDeployment(spec, fleet_url=fleet_url, token=fleet_token))
            else:
                backends.append(SimulatedDeployment(spec, time_scale=time_scale))
        return cls(backends)

    def backend(self, model: str) -> Backend:
        """The deployment serving ``model``, a served name or an alias of one."""
        try:
            return self._backends[self._aliases.get(model, model)]
        except KeyError:
            raise UnknownNameError("model", model, sorted(self._backends)) from None

    def aliases(self, name: str) -> list[str]:
        """The aliases of the served model ``name``, in the fleet's order."""
        return [alias for alias, served in self._aliases.items() if served == name]

    def backends(self) -> list[Backend]:
        return list(self._backends.values())

    def models(self, tenant: str | None = None) -> list[DeploymentSpec]:
        """Specs of the models ``tenant`` may use (all of them when ``tenant`` is None)."""
        specs = [b.spec for b in self._backends.values()]
        return [s for s in specs if tenant is None or not s.tenants or tenant in s.tenants]

    def submit(self, request: InferenceRequest) -> AsyncIterator[PoolEvent]:
        """Run ``request`` on its model's deployment: text and tool-call deltas, then the receipt."""
        return self.backend(request.model).generate(request)

    def embed(self, request: EmbeddingRequest) -> AsyncIterator[Embeddings | ComputeReceipt]:
        """Run an embedding call on its model's deployment: the vectors, then the receipt."""
        return self.backend(request.model).embed(request)

    async def status(self) -> list[dict[str, Any]]:
        return [await b.status() for b in self._backends.values()]

    def busy_chip_us(self) -> dict[str, tuple[str, int]]:
        """Busy chip-µs of every replica this process runs, since start: ``{replica: (instance type, chip-µs)}``
        (deployments simulated by a fleet process count there, not here)."""
        busy: dict[str, tuple[str, int]] = {}
        for backend in self._backends.values():
            busy |= backend.busy_chip_us()
        return busy

    def take_receipts(self) -> list[tuple[ComputeReceipt, float]]:
        """Receipts issued by the replicas this process runs since the last call, with their epoch times."""
        return [taken for backend in self._backends.values() for taken in backend.take_receipts()]

    async def aclose(self) -> None:
        for backend in self._backends.values():
            close = getattr(backend, "aclose", None)
            if close is not None:
                await close()
