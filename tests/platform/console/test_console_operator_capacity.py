"""The operator's capacity page over HTTP: the configuration search on a tenant's own recorded traffic, its errors
(shown on the page, changing nothing), a tenant without traffic, and the operator guard."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select

from switchyard.platform.billing.ledger import record_usage_bulk
from switchyard.platform.db import UNSCOPED, TenantScope
from switchyard.platform.models import AuditEvent, OperatorAuditEvent, UsageEvent, utc_now
from tests.platform.billing.factories import receipt
from tests.platform.console.factories import csrf_of, sign_in
from tests.platform.console.test_console_operator import _add_operator, _operator_sign_in

SERVED = "meta-llama/Llama-3.1-8B-Instruct"  # the default fleet's: 2 x trn2.48xlarge at TP 8


async def _traffic(app: Any, tenant_id: str, requests: int = 30) -> None:
    """``requests`` answered chat requests over the last hour, and an embedding call (no answer)."""
    now = utc_now()
    scope = TenantScope(tenant_id)
    events = [
        receipt(
            model=SERVED,
            occurred_at=now - timedelta(seconds=120 * (requests - i)),
            prompt_tokens=400 + 10 * i,
            completion_tokens=60 + i,
        )
        for i in range(requests)
    ]
    events.append(receipt(model="BAAI/bge-large-en-v1.5", occurred_at=now, completion_tokens=0))
    async with app.state.database.unit_of_work(scope) as session:
        await record_usage_bulk(session, scope=scope, events=events)


async def _as_operator(console: Any) -> None:
    await _add_operator(console.app)
    assert (await _operator_sign_in(console)).status_code == 303


def _form(token: str, **fields: Any) -> dict[str, Any]:
    return {
        "csrf_token": token,
        "days": "7",
        "model": "",
        "instance": ["trn2.48xlarge", "p5.48xlarge"],
        "tp": "4,8",
        "replicas": "1",
        "ttft_ms": "",
        "tpot_ms": "",
        **fields,
    }


async def _counts(app: Any) -> tuple[int, int, int]:
    async with app.state.database.unit_of_work(UNSCOPED) as session:
        return (
            int((await session.execute(select(func.count()).select_from(AuditEvent))).scalar_one()),
            int((await session.execute(select(func.count()).select_from(OperatorAuditEvent))).scalar_one()),
            int((await session.execute(select(func.count()).select_from(UsageEvent))).scalar_one()),
        )


async def test_the_tenant_s_page_leads_to_its_capacity_form_with_today_s_deployment(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await _traffic(console.app, tenant.id)
    await _as_operator(console)
    page = await console.get(f"/console/operator/tenants/{tenant.id}")
    assert f'href="/console/operator/tenants/{tenant.id}/capacity"' in page.text
    form = await console.get(f"/console/operator/tenants/{tenant.id}/capacity")
    assert form.status_code == 200, form.text
    assert "<h1>Capacity: " in form.text
    assert f"{SERVED} (30 requests in 30 days)" in form.text  # the embedding call is no answered request
    assert f"Today {SERVED} runs on 2 × trn2.48xlarge at TP 8" in form.text
    assert re.search(r'name="instance" value="trn2\.48xlarge" checked', form.text)
    assert re.search(r'name="instance" value="trn3-gen1-ultraserver">', form.text)  # offered, not checked
    assert 'id="price-trn3-gen1-ultraserver"' in form.text  # the catalog has no price: one can be assumed
    assert 'name="tp" required value="4,8,16"' in form.text  # around today's TP


async def test_the_search_shows_the_workload_the_cheapest_per_instance_type_and_the_front(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await _traffic(console.app, tenant.id)
    await _as_operator(console)
    path = f"/console/operator/tenants/{tenant.id}/capacity"
    token = csrf_of((await console.get(path)).text)
    before = await _counts(console.app)

    answer = await console.post(
        path,
        data=_form(
            token,
            instance=["trn2.48xlarge", "trn3-gen1-ultraserver"],
            **{"price.trn3-gen1-ultraserver": "150"},
        ),
    )

    assert answer.status_code == 200, answer.text
    assert '<dd id="workload-requests">30</dd>' in answer.text
    assert "all 30 requests" in answer.text
    assert re.search(r'<dd id="slo-ttft">[\d,]+ ms \(as today\)</dd>', answer.text)
    assert re.search(
        r'<dd id="baseline">p90 TTFT [\d,]+ ms, p90 TPOT [\d.]+ ms on 2 × trn2.48xlarge at TP 8', answer.text
    )
    best = answer.text.split('id="best-per-instance"')[1].split("</table>")[0]
    rows = re.findall(r'<tr data-instance="([^"]+)">', best)
    assert set(rows) <= {"trn2.48xlarge", "trn3-gen1-ultraserver"}
    assert rows, best
    assert re.search(r"\$\d+\.\d{4}</td>", best)  # cost per million output tokens
    assert "req/s" in best
    assert " ms</td>" in best
    if "trn3-gen1-ultraserver" in rows:
        assert "(assumed price: $150/h)" in best
    pareto = answer.text.split('id="pareto"')[1].split("</table>")[0]
    assert re.findall(r'<tr data-instance="([^"]+)">', pareto)
    assert 'name="price.trn3-gen1-ultraserver" inputmode="decimal" value="150"' in answer.text  # the form is kept
    assert await _counts(console.app) == before  # a search writes nothing


async def test_bad_input_is_refused_on_the_page_and_changes_nothing(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await _traffic(console.app, tenant.id)
    await _as_operator(console)
    path = f"/console/operator/tenants/{tenant.id}/capacity"
    token = csrf_of((await console.get(path)).text)
    before = await _counts(console.app)
    refused = {
        "TP degrees: whole numbers separated by commas": {"tp": "eight"},
        "replicas: between 1 and 64": {"replicas": "0"},
        "p90 TTFT objective: more than 0": {"ttft_ms": "-5"},
        "p90 TPOT objective: a number of milliseconds": {"tpot_ms": "fast"},
        "period: choose one of the periods offered": {"days": "3"},
        "&#39;trn9.huge&#39; is not in the simulator&#39;s catalog": {"instance": ["trn9.huge"]},
        "instance types: choose one at least": {"instance": []},
        "trn3-gen1-ultraserver has no price in the catalog": {"instance": ["trn3-gen1-ultraserver"]},
        "72 configurations asked": {
            "instance": ["trn2.48xlarge", "trn2.3xlarge", "p5.48xlarge"],
            "tp": "1,2,4,8,16,32",
            "replicas": "1,2,3,4",
        },
    }
    for message, fields in refused.items():
        answer = await console.post(path, data=_form(token, **fields))
        assert answer.status_code == 400, (message, answer.text)
        error = re.search(r'<p class="error" role="alert" id="capacity-error">(.*?)</p>', answer.text)
        assert error, (message, answer.text)
        assert message in error.group(1), (message, error.group(1))
        assert 'id="best-per-instance"' not in answer.text
    kept = await console.post(path, data=_form(token, tp="eight", ttft_ms="750"))
    assert 'name="tp" required value="eight"' in kept.text  # what was typed stays, to correct
    assert 'name="ttft_ms" inputmode="decimal" value="750"' in kept.text
    unknown_model = await console.post(path, data=_form(token, model="gpt-4o"))
    assert unknown_model.status_code == 200
    assert "No recorded traffic of gpt-4o in the last 7 days" in unknown_model.text
    assert await _counts(console.app) == before


async def test_a_tenant_without_traffic_gets_a_message_not_an_error(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await _as_operator(console)
    path = f"/console/operator/tenants/{tenant.id}/capacity"
    form = await console.get(path)
    assert form.status_code == 200
    assert "Today " not in form.text  # no model, so no deployment to name
    answer = await console.post(path, data=_form(csrf_of(form.text)))
    assert answer.status_code == 200, answer.text
    assert (
        '<p class="notice" role="status" id="capacity-notice">No recorded traffic of any model in the last 7 days'
        in (answer.text)
    )
    assert 'id="workload"' not in answer.text


async def test_only_an_operator_reaches_a_tenant_s_capacity_page(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await _traffic(console.app, tenant.id)
    await _add_operator(console.app)
    path = f"/console/operator/tenants/{tenant.id}/capacity"
    anonymous = await console.get(path)
    assert anonymous.status_code == 302
    assert anonymous.headers["location"] == f"/console/operator/sign-in?next={path}"
    assert (await sign_in(console, tenant.emails["owner"])).status_code == 303  # the tenant's own owner
    member_csrf = csrf_of((await console.get("/console/")).text)
    for answer in (await console.get(path), await console.post(path, data=_form(member_csrf))):
        assert answer.status_code == 302
        assert answer.headers["location"].startswith("/console/operator/sign-in?next=")
    assert (await console.get(f"/console/tenants/{tenant.id}/capacity")).status_code == 404  # no tenant-side page
    console.cookies.clear()
    assert (await _operator_sign_in(console)).status_code == 303
    assert (await console.get(path)).status_code == 200
    assert (await console.get("/console/operator/tenants/ten_nobody/capacity")).status_code == 404
    assert (await console.post(path, data=_form("not-the-token"))).status_code == 403  # the form's token is needed
