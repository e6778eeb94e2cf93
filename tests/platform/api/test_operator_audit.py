"""Operator actions are audited platform-wide: rate cards, fleet reloads, tenants and credits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


async def _operator_log(client: Any, headers: dict[str, str], action: str | None = None) -> list[dict[str, Any]]:
    query = f"?action={action}" if action else ""
    response = await client.get(f"/v1/admin/audit-log{query}", headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


async def test_a_rate_card_is_audited_with_its_terms_and_a_refused_one_is_not(
    client: Any, operator_headers: dict[str, str]
) -> None:
    body = {"instance_type": "inf2.xlarge", "price_per_chip_hour": "0.25", "model": "m"}
    refused = await client.post("/v1/admin/rate-cards", json={**body, "currency": "XXX"}, headers=operator_headers)
    assert refused.status_code == 400
    assert await _operator_log(client, operator_headers, "rate_card.create") == []
    created = (await client.post("/v1/admin/rate-cards", json=body, headers=operator_headers)).json()
    [event] = await _operator_log(client, operator_headers, "rate_card.create")
    assert (event["object"], event["target_type"], event["target_id"]) == (
        "operator_audit_event",
        "rate_card",
        created["id"],
    )
    assert event["details"]["price_per_chip_hour"] == "0.25"
    assert event["details"]["instance_type"] == "inf2.xlarge"
    assert event["actor"].startswith("opk_")
    assert event["request_id"]


async def test_tenant_creation_and_credits_are_in_both_logs(
    client: Any, operator_headers: dict[str, str], make_tenant: Any
) -> None:
    tenant = await make_tenant()
    granted = await client.post(
        f"/v1/admin/tenants/{tenant.id}/credits",
        json={"amount_minor": 500, "currency": "USD", "reason": "outage"},
        headers=operator_headers,
    )
    assert granted.status_code == 201, granted.text
    operator = {e["action"]: e for e in await _operator_log(client, operator_headers)}
    assert operator["tenant.create"]["target_id"] == tenant.id
    assert operator["credit.grant"]["target_id"] == granted.json()["id"]
    own = (await client.get("/v1/audit-log", headers=tenant.headers("admin"))).json()["data"]
    assert {"tenant.create", "credit.grant"} <= {e["action"] for e in own}


async def test_a_fleet_reload_is_audited(client: Any, operator_headers: dict[str, str], tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.json"
    spec = {"name": "tiny", "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4}
    fleet.write_text(json.dumps({"deployments": [spec]}))
    client.app.state.settings.fleet_file = str(fleet)
    assert (await client.post("/v1/admin/fleet/reload", headers=operator_headers)).status_code == 200
    [event] = await _operator_log(client, operator_headers, "fleet.reload")
    assert event["details"] == {"fleet_file": str(fleet), "deployments": ["tiny"]}


async def test_the_operator_log_is_for_operators_only(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    response = await client.get("/v1/admin/audit-log", headers=tenant.headers("owner"))
    assert response.status_code == 403
    assert response.json()["error"]["type"]
