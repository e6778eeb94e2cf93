"""An agent's model must be one the tenant may use: at creation, at each run, and on the worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.platform.agents_api.factories import MODEL, make_agent


async def test_models_the_tenant_may_not_use(
    client: Any, make_tenant: Any, operator_headers: dict[str, str], tmp_path: Path
) -> None:
    tenant, other = await make_tenant(), await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant)
    deployments = [
        {"name": MODEL, "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4, "tenants": [other.id]},
        {"name": "open", "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4},
    ]
    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps({"deployments": deployments}))
    client.app.state.settings.fleet_file = str(fleet)
    reloaded = await client.post("/v1/admin/fleet/reload", headers=operator_headers)
    assert reloaded.status_code == 200, reloaded.text

    refused = await client.post("/v1/agents", json={"name": "x", "model": MODEL}, headers=headers)
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "model_not_found"
    run = await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)
    assert run.status_code == 404  # the agent's model was withdrawn from this tenant
    assert run.json()["error"]["code"] == "model_not_found"
    allowed = await client.post("/v1/agents", json={"name": "x", "model": MODEL}, headers=other.headers("developer"))
    assert allowed.status_code == 201

    switched = await client.patch(f"/v1/agents/{agent['id']}", json={"model": "open"}, headers=headers)
    assert switched.json()["version"] == 2
    moved = await client.patch(f"/v1/agents/{agent['id']}", json={"model": MODEL}, headers=headers)
    assert moved.status_code == 404
