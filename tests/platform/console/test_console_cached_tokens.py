"""Cached input tokens in the console: the usage page shows them beside the input tokens of each group and of the
whole range, with the share of the input a prefix cache served; a run's trace shows them for the run and for each
model step."""

from __future__ import annotations

import html
import re
from typing import Any

from switchyard.platform.db import TenantScope
from switchyard.platform.models import utc_now
from tests.platform.agents_api.factories import make_agent, run_inline, wait_for_run
from tests.platform.billing.factories import rated_usage, receipt
from tests.platform.console.factories import sign_in

INSTRUCTIONS = "You answer for the library's lending desk: loans, renewals, fines and the reading room. " * 60


def _row(page: str, row_start: str) -> str:
    found = re.search(rf"{re.escape(row_start)}.*?</tr>", page, re.S)
    assert found, page
    return found.group(0)


def _cached_cell(row: str) -> tuple[str, str]:
    """The cached tokens of a usage table row and the share of its input they are."""
    cell = re.search(r'<td class="num cached">([^<]*)<span class="hint">([^<]*)</span></td>', row)
    assert cell, row
    return cell.group(1).strip(), cell.group(2)


async def test_the_usage_page_shows_cached_input_tokens_per_group_and_in_total(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    now = utc_now()
    await rated_usage(
        console.app.state.database,
        TenantScope(tenant.id),
        receipt(
            occurred_at=now, model="llama", prompt_tokens=4_000, cached_tokens=3_000, cache_saved_chip_us=2_400_000
        ),
        receipt(
            occurred_at=now, model="llama", prompt_tokens=4_000, cached_tokens=3_500, cache_saved_chip_us=3_600_000
        ),
        receipt(occurred_at=now, model="mistral", prompt_tokens=2_000, cached_tokens=0),
    )

    await sign_in(console, tenant.emails["viewer"])
    page = (await console.get("/console/usage?group=model")).text

    assert _cached_cell(_row(page, '<tr><th scope="row">llama')) == ("6,500", "81.2 %")
    assert _cached_cell(_row(page, '<tr><th scope="row">mistral')) == ("0", "0.0 %")
    total = _row(page, '<tr id="usage-total">')
    assert '<td class="num">10,000</td>' in total  # the input tokens, beside the cached ones
    assert _cached_cell(total) == ("6,500", "65.0 %")
    assert 'id="usage-cache-share">65.0 %<' in page
    assert 'id="usage-cached-tokens">6,500<' in page
    assert 'id="usage-cache-saved">0.001667<' in page  # 6,000,000 chip-µs in chip-hours, as the page shows them


async def test_a_runs_trace_shows_the_cached_input_tokens_of_the_run_and_its_model_step(
    console: Any, make_console_tenant: Any
) -> None:
    run_inline(console)
    tenant = await make_console_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(console, tenant, instructions=INSTRUCTIONS, model_params={"max_tokens": 16})
    runs = []
    for _ in range(2):
        body = {"agent_id": agent["id"], "thread": {"messages": [{"content": "Can I renew a loan?"}]}}
        created = (await console.post("/v1/runs", json=body, headers=headers)).json()
        runs.append(await wait_for_run(console, created["thread_id"], created["id"], headers, statuses={"completed"}))
    cached = runs[1]["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 1000

    await sign_in(console, tenant.emails["viewer"])
    page = html.unescape((await console.get(f"/console/runs/{runs[1]['id']}")).text)

    header = page[page.index('<dd id="trace-tokens">') :].split("</dd>")[0]
    assert f"({cached} in read from a prefix cache)" in header
    step = page[page.index('<dd class="step-tokens">') :].split("</dd>")[0]
    assert f"({cached} in read from a prefix cache)" in step
    assert f'<span class="hint step-cached">{cached} cached</span>' in page  # the steps table
