"""Model access: the one place that says whether a tenant may use a served model.

A deployment with no ``tenants`` list serves every tenant; one with a list serves those tenants only. Every
caller asks here: the models routes, chat completions, embeddings, the agent registry when an agent names its
model, and the run executor before each run. A model is asked for by its served name or by one of its aliases
(``llama-3.1-8b-instruct`` for ``meta-llama/Llama-3.1-8B-Instruct``, resolved by ``AcceleratorPool.backend``): the same
deployment is found, and answers and usage carry its served name.
"""

from __future__ import annotations

from switchyard.accelerator.errors import UnknownNameError
from switchyard.accelerator.pool import AcceleratorPool, Backend, DeploymentSpec
from switchyard.platform.http.errors import InvalidRequest, NotFound

__all__ = ["ModelNotFound", "may_use", "model_backend", "served_models"]


class ModelNotFound(NotFound):
    """404: the model is not served, or not to this tenant (the two are not told apart)."""

    default_code = "model_not_found"


def may_use(spec: DeploymentSpec, tenant_id: str) -> bool:
    """Whether ``tenant_id`` may use the deployment described by ``spec``."""
    return not spec.tenants or tenant_id in spec.tenants


def served_models(pool: AcceleratorPool, tenant_id: str) -> list[Backend]:
    """The deployments of ``pool`` that ``tenant_id`` may use, in the fleet file's order."""
    return [backend for backend in pool.backends() if may_use(backend.spec, tenant_id)]


def model_backend(pool: AcceleratorPool, model: str, tenant_id: str, *, task: str | None = None) -> Backend:
    """The deployment serving ``model`` to ``tenant_id``; raises :class:`ModelNotFound` (param ``model``).
    With ``task`` (``chat`` or ``embeddings``) a deployment serving the other task is a 400 naming ``model``.

    The message suggests only names the tenant may use, so it never reveals another tenant's deployments.
    """
    try:
        backend = pool.backend(model)
    except UnknownNameError:
        pass
    else:
        if may_use(backend.spec, tenant_id):
            if task is not None and backend.spec.task != task:
                serves = "embeddings (POST /v1/embeddings)" if backend.spec.task == "embeddings" else "chat"
                raise InvalidRequest(
                    f"{model} is a model for {serves}, not for {task}", param="model", code="model_not_supported"
                )
            return backend
    hint = UnknownNameError("model", model, [b.name for b in served_models(pool, tenant_id)])
    raise ModelNotFound(str(hint), param="model")
