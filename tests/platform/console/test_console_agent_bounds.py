"""The console's agent pages refuse numbers a column cannot hold as a form error or a 404, never a 500."""

from __future__ import annotations

from typing import Any

from tests.platform.console.factories import page_csrf, sign_in

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def test_a_max_tokens_that_is_no_plain_number_is_a_form_error(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/agents/new")
    form = {"name": "bounded", "model": MODEL, "instructions": "", "csrf_token": csrf}
    for max_tokens in ("²", "٣", "9" * 5_000, "-5", "1e3", "12abc"):
        refused = await console.post("/console/agents", data={**form, "model_params.max_tokens": max_tokens})
        assert refused.status_code == 400, (max_tokens[:20], refused.text[:300])
        assert 'id="model_params-max_tokens-error"' in refused.text
    assert (await console.get("/v1/agents", headers=tenant.headers())).json()["data"] == []

    made = await console.post("/console/agents", data={**form, "model_params.max_tokens": "64"})
    assert made.status_code == 303, made.text
    agent_id = made.headers["location"].rsplit("/", 1)[1]
    edited = await console.post(f"/console/agents/{agent_id}", data={**form, "model_params.max_tokens": "²"})
    assert edited.status_code == 400
    assert 'id="model_params-max_tokens-error"' in edited.text
    [agent] = (await console.get("/v1/agents", headers=tenant.headers())).json()["data"]
    assert (agent["version"], agent["model_params"]["max_tokens"]) == (1, 64)


async def test_a_version_past_what_a_column_holds_is_404(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    created = await console.post(
        "/v1/agents", json={"name": "a", "model": MODEL, "instructions": "x"}, headers=tenant.headers()
    )
    agent_id = created.json()["id"]
    await sign_in(console, tenant.emails["viewer"])
    for version in ("99999999999999999999", "2147483648", "9223372036854775808"):
        page = await console.get(f"/console/agents/{agent_id}/versions/{version}/diff")
        assert page.status_code == 404, (version, page.text[:300])
