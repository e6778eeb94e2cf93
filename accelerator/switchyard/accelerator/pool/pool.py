"""``AcceleratorPool.submit(InferenceRequest)`` → token events, then one ``ComputeReceipt``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from switchyard.accelerator.errors import UnknownNameError
from switchyard.accelerator.pool.fleet import DeploymentSpec
from switchyard.accelerator.pool.sim_backend import SimulatedDeployment
from switchyard.accelerator.pool.types import InferenceRequest, PoolEvent
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

    def max_chip_us(self, prompt_tokens: int, output_tokens: int) -> int: ...

    def cancel(self, request_id: str) -> None: ...

    def status(self) -> dict[str, Any]: ...


class AcceleratorPool:
    """Every served model of the fleet, by name."""

    def __init__(self, backends: Iterable[Backend]) -> None:
        self._backends: dict[str, Backend] = {b.name: b for b in backends}

    @classmethod
    def from_specs(cls, specs: Iterable[DeploymentSpec], *, time_scale: float = 1.0) -> AcceleratorPool:
        backends: list[Backend] = []
        for spec in specs:
            if spec.backend == "trainium-sim":
                backends.append(SimulatedDeployment(spec, time_scale=time_scale))
            else:
                backends.append(UpstreamDeployment(spec))
        return cls(backends)

    def backend(self, model: str) -> Backend:
        try:
            return self._backends[model]
        except KeyError:
            raise UnknownNameError("model", model, sorted(self._backends)) from None

    def backends(self) -> list[Backend]:
        return list(self._backends.values())

    def models(self, tenant: str | None = None) -> list[DeploymentSpec]:
        """Specs of the models ``tenant`` may use (all of them when ``tenant`` is None)."""
        specs = [b.spec for b in self._backends.values()]
        return [s for s in specs if tenant is None or not s.tenants or tenant in s.tenants]

    def submit(self, request: InferenceRequest) -> AsyncIterator[PoolEvent]:
        """Run ``request`` on its model's deployment: text and tool-call deltas, then the receipt."""
        return self.backend(request.model).generate(request)

    def status(self) -> list[dict[str, Any]]:
        return [b.status() for b in self._backends.values()]

    async def aclose(self) -> None:
        for backend in self._backends.values():
            close = getattr(backend, "aclose", None)
            if close is not None:
                await close()
