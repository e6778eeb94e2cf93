"""The blocking client against a real installation: typed objects, pages that walk every item, typed errors."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from switchyard.sdk import (
    Agent,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    Switchyard,
)
from tests.sdk.conftest import MODEL, Installation

pytestmark = pytest.mark.slow


@pytest.fixture
def tenant(installation: Installation) -> Iterator[Switchyard]:
    """A client holding the owner key of a new tenant (so each test starts from an empty tenant)."""
    with Switchyard(api_key=installation.operator_key, base_url=installation.base_url) as operator:
        created = operator.admin.tenants.create(name="sdk", owner_email="owner@sdk.example")
    with Switchyard(api_key=created.owner_key.value, base_url=installation.base_url) as client:
        yield client


def test_agents_round_trip_with_versions(tenant: Switchyard) -> None:
    agent = tenant.agents.create(name="helper", model=MODEL, instructions="Be brief.", metadata={"team": "a"})
    assert isinstance(agent, Agent)
    assert (agent.version, agent.metadata) == (1, {"team": "a"})
    updated = tenant.agents.update(agent.id, instructions="Be very brief.")
    assert (updated.version, updated.name, updated.instructions) == (2, "helper", "Be very brief.")
    assert [v.version for v in tenant.agents.versions(agent.id)] == [2, 1]  # newest first
    assert tenant.agents.retrieve(agent.id) == updated
    assert tenant.agents.delete(agent.id).deleted is True
    with pytest.raises(NotFoundError) as missing:
        tenant.agents.retrieve(agent.id)
    assert missing.value.status_code == 404
    assert missing.value.request_id


def test_iterating_a_page_walks_every_page(tenant: Switchyard) -> None:
    made = [tenant.agents.create(name=f"a{i}", model=MODEL).id for i in range(5)]
    first = tenant.agents.list(limit=2)
    assert len(first.data) == 2
    assert first.has_more
    assert [agent.id for agent in first] == made[::-1]  # newest first
    assert [agent.id for agent in tenant.agents.list(limit=2, order="asc")] == made
    last = tenant.agents.list(limit=5)
    assert not last.has_more
    assert last.next_page() is None


def test_errors_carry_the_envelope(tenant: Switchyard, installation: Installation) -> None:
    with pytest.raises(NotFoundError) as unknown:
        tenant.agents.create(name="x", model="no/such-model")
    assert (unknown.value.code, unknown.value.param) == ("model_not_found", "model")
    assert "no/such-model" in unknown.value.message
    with pytest.raises(BadRequestError) as bad:
        tenant.agents.create(name="x", model=MODEL, limits={"max_steps": 0})
    assert bad.value.type == "invalid_request_error"
    assert bad.value.param
    assert "max_steps" in bad.value.param
    assert [a.id for a in tenant.agents.list()] == []  # refused, nothing created
    stranger = Switchyard(api_key="sy_000000000000_" + "x" * 43, base_url=installation.base_url)
    with stranger, pytest.raises(AuthenticationError):
        stranger.agents.list()
    viewer_key = tenant.api_keys.create(name="read-only", role="viewer").value
    with Switchyard(api_key=viewer_key, base_url=installation.base_url) as viewer:
        assert viewer.agents.list().data == []
        with pytest.raises(PermissionDeniedError) as denied:
            viewer.agents.create(name="x", model=MODEL)
    assert denied.value.code == "insufficient_role"


def test_account_resources(tenant: Switchyard) -> None:
    served = {model.id: model for model in tenant.models.list()}
    assert MODEL in served
    assert tenant.models.retrieve(MODEL) == served[MODEL]  # an id with a slash reaches the right route
    member = tenant.members.create(email="ada@sdk.example", role="viewer")
    assert tenant.members.update(member.id, role="admin").role == "admin"
    assert {m.email for m in tenant.members.list()} == {"owner@sdk.example", "ada@sdk.example"}
    assert tenant.members.delete(member.id).deleted is True
    key = tenant.api_keys.create(name="ci")
    assert key.value.startswith("sy_")
    assert tenant.api_keys.revoke(key.id).revoked_at is not None
    actions = [event.action for event in tenant.audit_log.list()]
    assert actions.count("member.create") == 1
    assert [e.target_id for e in tenant.audit_log.list(action="api_key.revoke")] == [key.id]


def test_budgets(tenant: Switchyard) -> None:
    budget = tenant.budgets.set(limit_minor=5_00, currency="USD")
    assert (budget.scope, budget.limit_minor, budget.spent) == ("tenant", 500, Decimal(0))
    assert [b.id for b in tenant.budgets.list()] == [budget.id]
    assert tenant.budgets.retrieve(budget.id).hard is True
    tenant.budgets.delete(budget.id)
    assert list(tenant.budgets.list()) == []


def test_operator_routes(installation: Installation, tenant: Switchyard) -> None:
    with Switchyard(api_key=installation.operator_key, base_url=installation.base_url) as operator:
        card = operator.admin.create_rate_card(instance_type="inf2.xlarge", price_per_chip_hour="0.25", model="m")
        assert card.price_per_chip_hour == Decimal("0.25")
        assert card.id in {c.id for c in operator.admin.list_rate_cards(instance_type="inf2.xlarge")}
        tenants = list(operator.admin.tenants.list())
        assert len(tenants) >= 2
        tenant_id = tenants[0].id
        credit = operator.admin.grant_credit(tenant_id, amount_minor=250, reason="outage")
        assert [c.id for c in operator.admin.list_credits(tenant_id)] == [credit.id]
        assert operator.admin.fleet()["object"] == "fleet"
        logged = [e.action for e in operator.admin.audit_log()]
        assert {"tenant.create", "rate_card.create", "credit.grant"} <= set(logged)
    with pytest.raises(PermissionDeniedError):
        tenant.admin.tenants.list()
