"""The SDK's surface: exported names, sync/async twins with the same methods, and models that match the API's
own OpenAPI schema (so a renamed field fails here, not in a user's program)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import switchyard.sdk as sdk
from switchyard.sdk import AsyncSwitchyard, Switchyard
from switchyard.sdk import models as sdk_models

RESOURCES = [
    "agents",
    "workflows",
    "files",
    "threads",
    "models",
    "api_keys",
    "members",
    "audit_log",
    "budgets",
    "invoices",
    "usage",
    "admin",
]

# SDK model -> the API's schema component it reads
COMPONENTS = {
    "Agent": "AgentPublic",
    "AgentVersion": "AgentVersionPublic",
    "ApiKey": "ApiKeyPublic",
    "ApiKeyCreated": "ApiKeyCreated",
    "AuditEvent": "AuditEventPublic",
    "Budget": "BudgetPublic",
    "Credit": "CreditPublic",
    "File": "FilePublic",
    "Invoice": "InvoicePublic",
    "InvoiceLine": "InvoiceLinePublic",
    "Member": "MemberPublic",
    "Message": "MessagePublic",
    "Model": "ModelPublic",
    "RateCard": "RateCardPublic",
    "Run": "RunPublic",
    "RunStep": "StepPublic",
    "RunUsage": "RunUsage",
    "Tenant": "TenantPublic",
    "TenantCreated": "TenantCreated",
    "Thread": "ThreadPublic",
    "UsageBucket": "UsageBucketPublic",
    "Workflow": "WorkflowPublic",
    "WorkflowVersion": "WorkflowVersionPublic",
    "UsagePage": "UsagePage",
    "UsageResult": "UsageResult",
}


def test_all_names_exist_and_are_sorted() -> None:
    assert sdk.__all__ == sorted(sdk.__all__)
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None


def _public_methods(obj: Any) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(type(obj), inspect.isfunction)
        if not name.startswith("_")
    }


def _tree(resource: Any, prefix: str) -> dict[str, inspect.Signature]:
    methods = {f"{prefix}.{name}": sig for name, sig in _public_methods(resource).items()}
    for name, value in inspect.getmembers(type(resource)):
        if isinstance(value, property) or name.startswith("_") or not hasattr(value, "func"):
            continue
        methods |= _tree(getattr(resource, name), f"{prefix}.{name}")  # nested resources (cached properties)
    return methods


def test_the_async_client_has_every_method_of_the_blocking_one_with_the_same_parameters() -> None:
    blocking = Switchyard(api_key="sy_x")
    concurrent = AsyncSwitchyard(api_key="sy_x")
    for resource in RESOURCES:
        sync_methods = _tree(getattr(blocking, resource), resource)
        async_methods = _tree(getattr(concurrent, resource), resource)
        assert sync_methods.keys() == async_methods.keys()
        assert sync_methods, resource
        for name, signature in sync_methods.items():
            assert list(signature.parameters) == list(async_methods[name].parameters), name
    blocking.close()


def test_models_read_fields_the_api_documents() -> None:
    from tests.support.api_schema import openapi_document

    schema = openapi_document()["components"]["schemas"]
    for model_name, component in COMPONENTS.items():
        model = getattr(sdk_models, model_name)
        documented = set(schema[component]["properties"])
        assert set(model.model_fields) <= documented, (model_name, set(model.model_fields) - documented)
        required = set(schema[component].get("required", []))
        optional_here = {name for name, f in model.model_fields.items() if not f.is_required()}
        assert not (optional_here & required - {"object"}), model_name


@pytest.mark.parametrize("missing", ["", None])
def test_a_client_needs_a_key(missing: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWITCHYARD_API_KEY", raising=False)
    with pytest.raises(sdk.SwitchyardError, match="SWITCHYARD_API_KEY"):
        Switchyard(api_key=missing)
    monkeypatch.setenv("SWITCHYARD_API_KEY", "sy_env")
    monkeypatch.setenv("SWITCHYARD_BASE_URL", "http://api.example/v1/")
    with Switchyard() as client:
        assert (client.api_key, client.base_url) == ("sy_env", "http://api.example/v1")
