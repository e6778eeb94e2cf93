"""The billing HTTP API: rate cards (operator), budgets, invoices (JSON/CSV/HTML) and usage (OpenAI shape)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

from switchyard.platform.billing.invoices import finalize_due
from switchyard.platform.db import TenantScope
from tests.platform.billing.factories import rated_usage, receipt

NOV = datetime(2026, 11, 1, tzinfo=UTC)


def unix(at: datetime) -> int:
    return int((at - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())


async def test_rate_cards_are_operator_managed_and_exact(client: Any, operator_headers: dict[str, str]) -> None:
    body = {"instance_type": "inf2.xlarge", "price_per_chip_hour": "0.123456789012345", "model": "m"}
    created = await client.post("/v1/admin/rate-cards", json=body, headers=operator_headers)
    assert created.status_code == 201, created.text
    assert created.json()["price_per_chip_hour"] == "0.123456789012345"
    for bad in ({"price_per_chip_hour": 0.5}, {"price_per_chip_hour": "1.0000000000000001"}, {"currency": "XXX"}):
        response = await client.post("/v1/admin/rate-cards", json={**body, **bad}, headers=operator_headers)
        assert response.status_code == 400, (bad, response.text)
    past = {**body, "effective_from": "2020-01-01T00:00:00Z"}
    refused = await client.post("/v1/admin/rate-cards", json=past, headers=operator_headers)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "effective_from"
    listed = await client.get("/v1/admin/rate-cards?instance_type=inf2.xlarge", headers=operator_headers)
    assert [card["id"] for card in listed.json()["data"]] == [created.json()["id"]]


async def test_budgets_api(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    key_id = (await client.get("/v1/api-keys", headers=tenant.headers())).json()["data"][0]["id"]
    created = await client.post(
        "/v1/budgets", json={"limit_minor": 5000, "scope": "api_key", "scope_id": key_id}, headers=tenant.headers()
    )
    assert created.status_code == 201, created.text
    budget = created.json()
    assert (budget["scope"], budget["limit_minor"], budget["spent"], budget["remaining"]) == (
        "api_key",
        5000,
        "0.000000",
        "50.000000",
    )
    changed = await client.post(
        "/v1/budgets",
        json={"limit_minor": 100, "scope": "api_key", "scope_id": key_id, "hard": False},
        headers=tenant.headers("admin"),
    )
    assert changed.json()["id"] == budget["id"]
    assert changed.json()["remaining"] == "1.000000"
    bad = await client.post("/v1/budgets", json={"limit_minor": 1, "scope": "agent"}, headers=tenant.headers())
    assert bad.status_code == 400
    listed = await client.get("/v1/budgets", headers=tenant.headers("admin"))
    assert [b["id"] for b in listed.json()["data"]] == [budget["id"]]
    assert (await client.get("/v1/budgets", headers=tenant.headers("developer"))).status_code == 403
    deleted = await client.delete(f"/v1/budgets/{budget['id']}", headers=tenant.headers())
    assert deleted.json() == {"object": "budget.deleted", "id": budget["id"], "deleted": True}
    assert (await client.get(f"/v1/budgets/{budget['id']}", headers=tenant.headers())).status_code == 404
    audit = await client.get("/v1/audit-log", headers=tenant.headers())
    assert [e["action"] for e in audit.json()["data"]][:3] == ["budget.delete", "budget.set", "budget.set"]


async def test_budgets_api_takes_and_returns_alert_thresholds(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    made = await client.post("/v1/budgets", json={"limit_minor": 1000}, headers=tenant.headers())
    assert made.status_code == 201, made.text
    assert made.json()["alert_thresholds"] == [50, 80, 100]  # none set: the defaults
    own = await client.post(
        "/v1/budgets", json={"limit_minor": 1000, "alert_thresholds": [90, 10.0, 50]}, headers=tenant.headers()
    )
    assert own.status_code == 201, own.text
    assert (own.json()["id"], own.json()["alert_thresholds"]) == (made.json()["id"], [10, 50, 90])
    for bad in ([], [0], [101], [10, 10], [1, 2, 3, 4, 5, 6], [True], ["50"], 50, [12.5]):
        refused = await client.post(
            "/v1/budgets", json={"limit_minor": 1, "alert_thresholds": bad}, headers=tenant.headers()
        )
        assert refused.status_code == 400, (bad, refused.text)
        error = refused.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_value"), bad
        assert error["param"].startswith("alert_thresholds"), (bad, error)
    unchanged = (await client.get(f"/v1/budgets/{made.json()['id']}", headers=tenant.headers())).json()
    assert (unchanged["limit_minor"], unchanged["alert_thresholds"]) == (1000, [10, 50, 90])
    back = await client.post(
        "/v1/budgets", json={"limit_minor": 1000, "alert_thresholds": None}, headers=tenant.headers()
    )
    assert back.json()["alert_thresholds"] == [50, 80, 100]


async def test_invoice_json_csv_html(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    database = client.app.state.database
    await rated_usage(
        database,
        TenantScope(tenant.id),
        receipt(chip_us=3_600_000_000, occurred_at=NOV + timedelta(days=1)),
        receipt(chip_us=1_800_000_000, occurred_at=NOV + timedelta(days=2)),
    )
    await finalize_due(database, now=datetime(2026, 12, 5, tzinfo=UTC))
    listed = await client.get("/v1/invoices", headers=tenant.headers("admin"))
    (invoice,) = listed.json()["data"]
    assert (invoice["status"], invoice["total_minor"], invoice["total"], invoice["currency"]) == (
        "finalized",
        440,  # 1.5 chip-hours * 2.93625 = 4.404375 -> 4.40, rounded once
        "4.40",
        "USD",
    )
    (line,) = invoice["lines"]
    assert (line["chip_us"], line["quantity_chip_hours"], line["unit_price"], line["event_count"]) == (
        5_400_000_000,
        "1.500000000",
        "2.936250000000000",
        2,
    )
    one = await client.get(f"/v1/invoices/{invoice['id']}", headers=tenant.headers())
    assert one.json() == invoice
    as_csv = await client.get(f"/v1/invoices/{invoice['id']}?format=csv", headers=tenant.headers())
    assert as_csv.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [(r["kind"], r["amount_minor"], r["amount"]) for r in rows] == [
        ("usage", "440", "4.40"),
        ("total", "440", "4.40"),
    ]
    as_html = await client.get(f"/v1/invoices/{invoice['id']}?format=html", headers=tenant.headers())
    assert as_html.headers["content-type"].startswith("text/html")
    assert "4.40 USD" in as_html.text
    assert "Finalized" in as_html.text
    assert (await client.get(f"/v1/invoices/{invoice['id']}?format=pdf", headers=tenant.headers())).status_code == 400


async def test_usage_buckets_groups_and_pages(client: Any, make_tenant: Any) -> None:
    tenant, other = await make_tenant(), await make_tenant()
    database = client.app.state.database
    await rated_usage(
        database,
        TenantScope(tenant.id),
        receipt(
            chip_us=100, occurred_at=NOV + timedelta(hours=1, minutes=5), model="a", prompt_tokens=3, cached_tokens=2
        ),
        receipt(chip_us=200, occurred_at=NOV + timedelta(hours=1, minutes=50), model="b", completion_tokens=7),
        receipt(chip_us=400, occurred_at=NOV + timedelta(days=1, hours=3), model="a"),
    )
    await rated_usage(database, TenantScope(other.id), receipt(chip_us=10**9, occurred_at=NOV + timedelta(hours=1)))
    query = f"start_time={unix(NOV)}&end_time={unix(NOV + timedelta(days=3))}"
    daily = (await client.get(f"/v1/usage?{query}", headers=tenant.headers("viewer"))).json()
    assert daily["object"] == "page"
    assert daily["has_more"] is False
    assert [len(b["results"]) for b in daily["data"]] == [1, 1, 0]
    first = daily["data"][0]
    assert (first["start_time"], first["end_time"]) == (unix(NOV), unix(NOV + timedelta(days=1)))
    assert first["results"][0] == {
        "object": "organization.usage.compute",
        "chip_us": 300,
        "input_tokens": 13,
        "output_tokens": 12,
        "input_cached_tokens": 2,
        "cache_saved_chip_us": 0,
        "num_model_requests": 2,
        "agent_id": None,
        "workflow_id": None,
        "api_key_id": None,
        "model": None,
        "instance_type": None,
    }
    grouped = (
        await client.get(f"/v1/usage?{query}&group_by=model&bucket_width=1h&limit=2", headers=tenant.headers("viewer"))
    ).json()
    assert len(grouped["data"]) == 2
    assert grouped["has_more"] is True
    assert [(r["model"], r["chip_us"]) for r in grouped["data"][1]["results"]] == [("a", 100), ("b", 200)]
    follow = await client.get(
        f"/v1/usage?{query}&group_by=model&bucket_width=1h&limit=100&page={grouped['next_page']}",
        headers=tenant.headers("viewer"),
    )
    hours = follow.json()["data"]
    assert len(hours) == 70
    assert sum(r["chip_us"] for b in hours for r in b["results"]) == 400
    bad = await client.get(f"/v1/usage?{query}&group_by=colour", headers=tenant.headers("viewer"))
    assert bad.status_code == 400
    exported = await client.get(f"/v1/usage/export.csv?{query}&group_by=model,instance_type", headers=tenant.headers())
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [(r["model"], r["instance_type"], r["chip_us"], r["input_cached_tokens"]) for r in rows] == [
        ("a", "trn2.48xlarge", "100", "2"),
        ("b", "trn2.48xlarge", "200", "0"),
        ("a", "trn2.48xlarge", "400", "0"),
    ]


async def test_a_rate_card_names_a_catalog_instance_type_or_a_custom_one(
    client: Any, operator_headers: dict[str, str]
) -> None:
    for bogus in ("trn9.bogus", "custom:", "custom: spaces", "TRN2.48XLARGE"):
        body = {"instance_type": bogus, "price_per_chip_hour": "1.5"}
        refused = await client.post("/v1/admin/rate-cards", json=body, headers=operator_headers)
        assert refused.status_code == 400, (bogus, refused.text)
        error = refused.json()["error"]
        assert (error["param"], error["code"]) == ("instance_type", "invalid_value")
        assert "custom:" in error["message"]
    for known in ("trn2.48xlarge", "custom:h100-rack.1"):
        body = {"instance_type": known, "price_per_chip_hour": "1.5"}
        made = await client.post("/v1/admin/rate-cards", json=body, headers=operator_headers)
        assert made.status_code == 201, (known, made.text)
    listed = await client.get("/v1/admin/rate-cards?instance_type=trn9.bogus", headers=operator_headers)
    assert listed.json()["data"] == []


async def test_a_rate_card_that_priced_nothing_can_be_deleted_one_that_did_cannot(
    client: Any, operator_headers: dict[str, str], make_tenant: Any
) -> None:
    """A mistaken card (a future price with a typo) can be withdrawn; a card that priced usage stays, so the invoices
    it priced can be explained; catalog baseline cards stay (they would be seeded again)."""
    from switchyard.platform.billing.rates import DEFAULTS_EFFECTIVE_FROM

    future = {
        "instance_type": "trn2.48xlarge",
        "price_per_chip_hour": "29.3625",
        "effective_from": "2031-01-01T00:00:00Z",
    }
    mistaken = (await client.post("/v1/admin/rate-cards", json=future, headers=operator_headers)).json()
    deleted = await client.delete(f"/v1/admin/rate-cards/{mistaken['id']}", headers=operator_headers)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"object": "rate_card.deleted", "id": mistaken["id"], "deleted": True}
    listed = (await client.get("/v1/admin/rate-cards?instance_type=trn2.48xlarge", headers=operator_headers)).json()
    assert mistaken["id"] not in [card["id"] for card in listed["data"]]
    again = await client.delete(f"/v1/admin/rate-cards/{mistaken['id']}", headers=operator_headers)
    assert (again.status_code, again.json()["error"]["param"]) == (404, "rate_card_id")
    audit = (await client.get("/v1/admin/audit-log?action=rate_card.delete", headers=operator_headers)).json()
    assert [event["target_id"] for event in audit["data"]] == [mistaken["id"]]

    # a card for one model, in effect now, that then prices a tenant's usage
    card = {"instance_type": "trn2.48xlarge", "price_per_chip_hour": "3", "model": "priced-model"}
    used = (await client.post("/v1/admin/rate-cards", json=card, headers=operator_headers)).json()
    tenant = await make_tenant()
    event = receipt(model="priced-model", occurred_at=datetime.now(UTC))
    await rated_usage(client.app.state.database, TenantScope(tenant.id), event)
    refused = await client.delete(f"/v1/admin/rate-cards/{used['id']}", headers=operator_headers)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "rate_card_in_use"

    baseline = [c for c in listed["data"] if c["effective_from"].startswith(str(DEFAULTS_EFFECTIVE_FROM.year))]
    assert baseline, listed
    kept = await client.delete(f"/v1/admin/rate-cards/{baseline[0]['id']}", headers=operator_headers)
    assert kept.status_code == 409
    assert kept.json()["error"]["code"] == "rate_card_baseline"
