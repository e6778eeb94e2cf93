"""One tenant cannot hurt another: tenant A attacks the shared resources of the production layout while tenant B
does ordinary work, and all of B's work succeeds; A's hard budget holds; B pays for exactly its own calls.

Layout: the README's production section as real processes (``tests/system/installation.py``: the fleet process,
two API processes, two workers and beat on PostgreSQL and a Redis of the test's own), with 60 requests per key per
minute so that a flood can pass a key's rate. Tenants A and B are made by ``switchyard tenant create``.

B (``benchmarks/neighbours.py``: :class:`Ordinary`) runs chat completions and embeddings through the official
``openai`` client and calculator agent runs through ``switchyard.sdk``, every loop on a key of its own, paced under
that rate. A (:class:`Attacker`) runs each attack in turn, two loops of at most two requests a second (what one
request costs, not how many are sent): schema bombs (an ``allOf``/``$ref`` bomb and 100,000-character strings in
Responses' ``text.format``, a function tool of ten 2,000-item arrays with ``tool_choice: "required"`` on Responses
and chat completions, each with a tiny ``max_output_tokens``/``max_tokens``), 2,048-input embeddings, 90
background responses at once from one key (left to run), and console sign-ins with wrong passwords from varied
``X-Forwarded-For`` addresses. Two rounds per attack of a 6 s window of B alone, then a 6 s window beside the attack
that lasts on until A's work is done: its requests answered, none of its runs or responses queued or running, no
job left in the broker's runs queue (at most 30 s; past that B's next window counts beside the attack too). No
call of B's spans two windows: B's calls in flight end before the next window starts.

Asserted afterwards: every call of B succeeded; A's hard budget ($1.00) is not exceeded once everything is
settled; B's usage (``GET /v1/usage``: tokens, chip-us, model requests) equals the sum of what B's own answers
reported. B's p99 latency beside each attack against its p99 alone (the windows alternate so that the machine's own
noise falls on both sides) is reported with the slowest calls (a run's time queued and running, a chat
completion's simulated time in the fleet); over every window (``all``) it must stay under 3x for each kind of call:
the goal is 2x (past it is reported), asserted loosely since a 2-core machine runs every process of the layout and
both tenants' clients (A's in a process of its own), where a p99 of ~100 calls is a few calls. Measured there:
~1.3-1.8x over all windows, at most ~2.3x beside one attack.
``SWITCHYARD_SYSTEM_TEST_ATTACKS`` runs only some attacks.
``benchmarks/noisy_neighbour.py`` prints the same ratios per attack.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from benchmarks.neighbours import (
    A_BUSY_SQL,
    KINDS,
    Attacker,
    Ordinary,
    Sample,
    Tenant,
    WindowPlan,
    p99,
    rows,
    run_windows,
    slow_requests_by_process,
    worker_backlog,
)
from tests.system.installation import Installation

# alone: its ratios (B beside the noise against B alone) mean nothing while other tests load the same two cores
pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.system, pytest.mark.alone]

TIME_SCALE = 0.05
LEASE_S = 30.0
KEY_REQUESTS_PER_MINUTE = 60
A_BUDGET_MINOR = 100  # $1.00, hard
GOAL_P99_RATIO = 2.0  # reported past it
MAX_P99_RATIO = 3.0  # asserted: the goal, loosely (a p99 of ~100 calls on a 2-core machine is a few calls)
SETTLE_S = 60.0
PLAN = WindowPlan(window_s=6.0, rounds=2, warm_up_s=5.0)
ONLY = "SWITCHYARD_SYSTEM_TEST_ATTACKS"  # debugging: only these attacks, e.g. "schema bombs,sign-in flood"


@pytest.mark.timeout(900)
def test_a_noisy_neighbour_cannot_fail_bill_or_outspend_into_another_tenant(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    if shutil.which("redis-server") is None:
        pytest.fail("the system test needs `redis-server` on PATH (it starts a Redis of its own)")
    inst = Installation(postgres_url, tmp_path, TIME_SCALE, LEASE_S)
    report: list[str] = []
    try:
        inst.configure()
        inst.env["SWITCHYARD_KEY_REQUESTS_PER_MINUTE"] = str(KEY_REQUESTS_PER_MINUTE)  # the layout's env, shared
        inst.start()
        a, b = _tenant(inst, "noisy", "a"), _tenant(inst, "ordinary", "b")
        attacker, ordinary = Attacker(a), Ordinary(b)
        asyncio.run(_set_budget(a, A_BUDGET_MINOR))
        only = [name.strip() for name in os.environ[ONLY].split(",")] if os.environ.get(ONLY) else None
        if only:
            report.append(f"ONLY these attacks ({ONLY}): {only}")
        skipped = asyncio.run(run_windows(ordinary, attacker, PLAN, _busy(inst, a), attacks=only, log=report))
        _settle(inst, [a.id, b.id], report)
        _where_slow(inst, ordinary, report)
        failures = _failures(ordinary, report)
        if skipped:
            failures.append(
                f"rounds not run, {PLAN.max_s:.0f} s having passed (B's calls or A's aftermath too slow): {skipped}"
            )
        failures += asyncio.run(_a_within_budget(a, report))
        failures += asyncio.run(_b_billed_for_itself(ordinary, report))
    except BaseException:
        print("\n".join(report))
        print(inst.layout.tails() if hasattr(inst, "layout") else "(no processes)")
        raise
    finally:
        inst.cleanup()
    print("\n".join(report))
    if failures:
        pytest.fail(f"{len(failures)} violations:\n  - " + "\n  - ".join(failures), pytrace=False)


def _busy(inst: Installation, a: Tenant) -> Callable[[], Awaitable[int]]:
    """A's queued or running work, and any job the workers still hold: no window of B alone starts before both
    are done."""
    import redis

    broker = redis.Redis(host="127.0.0.1", port=inst.redis_port, db=0)

    def count() -> int:
        return int(inst.pg.rows(A_BUSY_SQL, a.id, a.id)[0][0]) + worker_backlog(broker)

    async def busy() -> int:
        return await asyncio.to_thread(count)

    return busy


def _tenant(inst: Installation, name: str, letter: str) -> Tenant:
    made = inst.cli("tenant", "create", name, "--owner-email", f"owner@{letter}.example")
    assert made.returncode == 0, made.stderr
    return Tenant.from_cli(made.stdout, inst.api_ports)


async def _set_budget(tenant: Tenant, limit_minor: int) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url(), timeout=30) as client:
        answer = await client.post(
            "/v1/budgets",
            json={"limit_minor": limit_minor, "hard": True},
            headers={"authorization": f"Bearer {tenant.owner_key}"},
        )
        assert answer.status_code in (200, 201), answer.text


def _settle(inst: Installation, tenant_ids: list[str], report: list[str]) -> None:
    """Wait (bounded) until no run of either tenant is active, no usage event is unrated and no hold is left."""
    started = time.monotonic()
    while time.monotonic() - started < SETTLE_S:
        busy = inst.pg.rows(
            "SELECT (SELECT count(*) FROM runs WHERE tenant_id = ANY(%s) AND status IN "
            "('queued', 'in_progress', 'cancelling')) + (SELECT count(*) FROM usage_events WHERE status = 'pending')"
            " + (SELECT count(*) FROM budgets WHERE reserved_micros <> 0)",
            tenant_ids,
        )[0][0]
        if busy == 0:
            break
        time.sleep(1.0)
    report.append(f"settled in {time.monotonic() - started:.0f} s")


def _failures(ordinary: Ordinary, report: list[str]) -> list[str]:
    failures = []
    measured = [s for s in ordinary.samples if s.window != "warm-up"]
    errors = Counter((s.kind, s.window, (s.error or "")[:160]) for s in measured if s.error)
    if errors:
        failures.append(
            f"{sum(errors.values())} of B's {len(measured)} calls failed: "
            + "; ".join(f"{kind} beside {window}: {error} (x{n})" for (kind, window, error), n in errors.items())
        )
    for row in rows(ordinary):
        slowest = sorted((s for s in measured if s.kind == row.kind), key=lambda s: -s.latency_s)[:3]
        report.append(
            f"B's {row.kind} beside {row.attack}: p99 {p99(row.beside) * 1e3:.0f} ms ({len(row.beside)} calls), "
            f"alone {p99(row.alone) * 1e3:.0f} ms ({len(row.alone)} calls): x{row.ratio:.2f}"
            + (f"; slowest {[_slow(s) for s in slowest]}" if row.attack == "all" else "")
        )
        if row.ratio >= GOAL_P99_RATIO:
            report.append(
                f"B's {row.kind} beside {row.attack}: p99 at {row.ratio:.2f}x alone, past the {GOAL_P99_RATIO}x goal"
            )
        if row.attack == "all" and row.ratio >= MAX_P99_RATIO:
            failures.append(
                f"B's {row.kind}: p99 beside A at {row.ratio:.2f}x its p99 alone (at most {MAX_P99_RATIO}x)"
            )
    kinds = {row.kind for row in rows(ordinary) if row.attack == "all"}
    failures += [f"B's {kind}: no calls both alone and beside A" for kind in KINDS if kind not in kinds]
    return failures


def _where_slow(inst: Installation, ordinary: Ordinary, report: list[str]) -> None:
    """Where B's slowest calls may have waited: B's own client, the fleet, or which API process."""
    api = {f"api-{i}": port for i, port in enumerate(inst.api_ports)}
    routes = ("/v1/chat/completions", "/v1/embeddings")
    slow = asyncio.run(slow_requests_by_process(api, routes)) | asyncio.run(
        slow_requests_by_process({"fleet": inst.fleet_port})
    )
    report.append(f"chat completions and embeddings over 1 s (GET /metrics of each process, A's too): {slow}")
    stalls = ", ".join(f"{late * 1e3:.0f} ms beside {window}" for window, late in ordinary.stalls) or "never"
    report.append(f"B's client's own event loop 100 ms late or more: {stalls}")


def _slow(sample: Sample) -> str:
    text = f"{sample.latency_s * 1e3:.0f} ms beside {sample.window}"
    if sample.simulated_ms is not None:
        text += f" ({sample.simulated_ms:.0f} ms simulated in the fleet, x{TIME_SCALE} on the wall clock)"
    if sample.run and sample.timeline:
        created, started, completed = sample.timeline
        text += (
            f" ({sample.run[1]}: started {(started - created).total_seconds():.1f} s after its creation, "
            f"completed {(completed - started).total_seconds():.1f} s after that)"
        )
    return text


async def _a_within_budget(a: Tenant, report: list[str]) -> list[str]:
    async with httpx.AsyncClient(base_url=a.base_url(), timeout=30) as client:
        answer = await client.get("/v1/budgets", headers={"authorization": f"Bearer {a.owner_key}"})
    answer.raise_for_status()
    (budget,) = [row for row in answer.json()["data"] if row["scope"] == "tenant"]
    spent, limit = Decimal(budget["spent"]), Decimal(budget["limit_minor"]) / 100
    report.append(f"A's hard budget: spent {spent} of {limit} USD, reserved {budget['reserved']}")
    if spent > limit:
        return [f"A spent {spent} USD past its hard budget of {limit} USD"]
    return []


async def _b_billed_for_itself(ordinary: Ordinary, report: list[str]) -> list[str]:
    """B's usage, as the API reports it, equals the sum of what B's answers said they used (a run whose client
    saw an error is read again: it may have gone on)."""
    b, samples = ordinary.tenant, ordinary.samples
    for sample in samples:
        if sample.error and sample.run is not None:
            await ordinary.read_run_usage(sample)
    # B is the test's own tenant: from yesterday's start, so a run that crosses midnight is counted whole
    yesterday = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    async with httpx.AsyncClient(base_url=b.base_url(), timeout=30) as client:
        answer = await client.get(
            "/v1/usage",
            params={"start_time": int(yesterday.timestamp()), "bucket_width": "1d", "limit": 2},
            headers={"authorization": f"Bearer {b.owner_key}"},
        )
    answer.raise_for_status()
    fields = ("input_tokens", "output_tokens", "chip_us", "num_model_requests")
    billed = {f: sum(r[f] for bucket in answer.json()["data"] for r in bucket["results"]) for f in fields}
    answered = [s for s in samples if not s.error or s.run is not None]
    own = {
        "input_tokens": sum(s.input_tokens for s in answered),
        "output_tokens": sum(s.output_tokens for s in answered),
        "chip_us": sum(s.chip_us for s in answered),
        "num_model_requests": sum(s.model_requests for s in answered),
    }
    report.append(f"B billed {billed}; B's answers used {own} ({len(samples) - len(answered)} calls failed)")
    if billed != own:
        return [f"B's usage {billed} is not what B's own {len(answered)} answered calls used: {own}"]
    return []
