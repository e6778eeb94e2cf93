"""The system test's oracle can fail: each check, fed what a defect leaves behind, reports it (and stays quiet on
what the product is allowed to leave). Runs in every `make test`; the system test itself is opt-in."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.system.ledger import Attempt, Ledger, Request
from tests.system.oracle import (
    SlotHolding,
    UsageRow,
    check_chat_billing,
    check_exits,
    check_members,
    check_reconcile,
    check_runs,
    check_served,
    check_slots,
    check_timeouts,
    read_slots,
)


def _chat(
    ledger: Ledger, *, answered: bool, chip_us: int = 100, max_tokens: int = 50, killed: bool = False, seen: bool = True
) -> Attempt:
    request = ledger.begin("chat", stream=True, max_tokens=max_tokens)
    attempt = Attempt(ledger.next_id(), 8000, "POST", "/v1/chat/completions", request, started=time.monotonic())
    attempt.ended, attempt.killed = attempt.started + 1.0, killed
    attempt.completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}" if seen else None
    ledger.attempts.append(attempt)
    request.attempts.append(attempt)
    if answered:
        request.answered, request.outcome, request.chip_us = attempt, "answered", chip_us
    return attempt


def _usage(attempt: Attempt, *, tokens: int = 50, chip_us: int = 100) -> UsageRow:
    assert attempt.completion_id is not None
    return UsageRow(attempt.completion_id, None, 9, tokens, chip_us)


def _unseen(tokens: int = 50) -> UsageRow:
    return UsageRow(f"chatcmpl-{uuid.uuid4().hex[:12]}", None, 9, tokens, 100)


def test_chat_billing_accepts_one_event_per_answer_and_partial_cancellations() -> None:
    ledger = Ledger("t")
    answered = _chat(ledger, answered=True)
    cancelled = _chat(ledger, answered=False)
    killed = _chat(ledger, answered=False, killed=True)
    never_billed = _chat(ledger, answered=False)
    _chat(ledger, answered=False, killed=True, seen=False)  # died before its first byte: may be billed, once
    usage = [_usage(answered), _usage(cancelled, tokens=7), _usage(killed), _unseen(), _unseen(tokens=3)]
    assert check_chat_billing(ledger, usage) == []
    assert never_billed.completion_id not in {u.event_id for u in usage}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unbilled answer", "answered chat completions with no usage event"),
        ("billed without answer", "usage events for requests that got no answer"),
        ("wrong amount", "usage events whose chip-us differ"),
        ("billed, never seen", "usage events of completions no client saw a byte of, beyond the 1 requests"),
    ],
)
def test_chat_billing_reports_what_a_defect_leaves(case: str, expected: str) -> None:
    ledger = Ledger("t")
    answered = _chat(ledger, answered=True)
    lost = _chat(ledger, answered=False)
    _chat(ledger, answered=False, killed=True, seen=False)
    usage = {
        "unbilled answer": [],
        "billed without answer": [_usage(answered), _usage(lost)],
        "wrong amount": [_usage(answered, chip_us=99)],
        "billed, never seen": [_usage(answered), _unseen(), _unseen()],
    }[case]
    [failure] = check_chat_billing(ledger, usage)
    assert failure.startswith(expected)


def _run(status: str, *, error: dict[str, str] | None = None, steps: int = 1) -> tuple[str, str, dict, int]:
    run_id = f"run_{uuid.uuid4().hex[:8]}"
    state = {
        "last_error": error,
        "steps": [{"id": f"{run_id}-s{i}", "type": "model_call", "usage": {"total_tokens": 1}} for i in range(steps)],
    }
    return run_id, status, state, 10 * steps


def _billed(run: tuple[str, str, dict, int]) -> list[UsageRow]:
    return [UsageRow(step["id"], run[0], 1, 1, 10) for step in run[2]["steps"]]


def test_runs_completed_or_failed_with_a_reason_and_billed_per_step_pass() -> None:
    done, failed = _run("completed", steps=2), _run("failed", error={"code": "model_error", "message": "boom"})
    assert check_runs([done, failed], _billed(done) + _billed(failed)) == []


def test_runs_report_stuck_silent_and_misbilled_runs() -> None:
    stuck, silent, misbilled = _run("queued", steps=0), _run("failed", error=None), _run("completed", steps=2)
    failures = check_runs([stuck, silent, misbilled], _billed(silent) + _billed(misbilled)[:1])
    assert [f.split(" (")[0].split(":")[0] for f in failures] == [
        "runs not terminal",
        "runs neither completed nor failed with a stated last_error",
        "runs whose model steps and usage events disagree",
    ]
    assert check_runs([], []) == ["no agent run was created at all"]


def test_timeouts_report_slow_timed_out_and_unfinished_attempts() -> None:
    ledger = Ledger("t")
    fine, slow, timed_out, open_ = (_chat(ledger, answered=True) for _ in range(4))
    slow.ended = slow.started + 30
    timed_out.error = "ReadTimeout: timed out"
    open_.ended = None
    [failure] = check_timeouts(ledger, timeout_s=20)
    assert failure.startswith("requests that outlived the client timeout of 20 s: 3")
    assert fine.id not in failure


def test_slots_allow_only_the_expiring_slots_of_killed_requests() -> None:
    now = time.time()
    crashed = {"chatcmpl-aa": now - 5}
    expiring = SlotHolding("sy:cc:tenant:a", "holders", 1, (("chatcmpl-aa/01", now - 5 + 300),))
    unseen = SlotHolding("sy:cc:tenant:c", "holders", 1, (("chatcmpl-bb/02", now - 5 + 300),))
    zero = SlotHolding("sy:cc:tenant:b", "counter", 0)
    assert check_slots([expiring, unseen, zero], crashed, [now - 5], ttl_s=300) == []
    leaked = SlotHolding("sy:cc:tenant:a", "holders", 1, (("chatcmpl-cc/03", now + 200),))
    renewed = SlotHolding("sy:cc:tenant:a", "holders", 1, (("chatcmpl-aa/01", now + 600),))
    counter = SlotHolding("sy:cc:tenant:b", "counter", 2)
    for slots in ([leaked], [renewed], [counter], [unseen, leaked]):
        [failure] = check_slots(slots, crashed, [] if slots != [unseen, leaked] else [now - 5], ttl_s=300)
        assert failure.startswith("concurrency slots left held: 1")


@pytest.mark.redis
def test_read_slots_reads_counters_and_sorted_sets(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    prefix = f"sy:test:{uuid.uuid4().hex[:8]}:"
    seconds, _micros = client.time()
    try:
        client.set(prefix + "counter", 3)
        client.zadd(prefix + "holders", {"live": (seconds + 60) * 1000, "expired": (seconds - 60) * 1000})
        slots = {s.key.removeprefix(prefix): s for s in read_slots(client, prefix)}
        assert slots["counter"] == SlotHolding(prefix + "counter", "counter", 3)
        assert slots["holders"].count == 1
        assert [holder for holder, _expiry in slots["holders"].holders] == ["live"]
    finally:
        client.delete(prefix + "counter", prefix + "holders")
        client.close()


def test_exits_reconcile_and_members() -> None:
    assert check_exits({"api-0": 0.3, "worker-0": 2.0}, 10) == []
    assert len(check_exits({"api-0": None, "worker-0": 12.0}, 10)) == 1

    clean = "  trn2.48xlarge: attributed 1,000 chip-us, fleet busy 1,000\n  OK: no discrepancies"
    assert check_reconcile("2026-12", 0, clean) == []
    skipped = "  trn2.48xlarge: attributed 1,000 chip-us, fleet busy not recorded\n  OK: no discrepancies"
    assert check_reconcile("2026-12", 0, skipped) != []
    assert check_reconcile("2026-12", 0, "  OK: no discrepancies") != []
    assert check_reconcile("2026-12", 1, clean) != []

    expected = {"a@x": "developer", "b@x": None, "c@x": "viewer"}
    assert check_members(expected, {"c@x"}, {"a@x": ["developer"]}, [401]) == []
    assert len(check_members(expected, set(), {"a@x": ["developer", "developer"], "b@x": ["viewer"]}, [200])) == 2


def test_ledger_request_records_its_attempts() -> None:
    ledger = Ledger("t")
    request = ledger.begin("chat", stream=False, max_tokens=5)
    assert isinstance(request, Request)
    assert ledger.requests == [request]
    assert ledger.next_id() == "sys-t-000001"


def test_served_needs_most_chat_completions_answered_and_runs_completed() -> None:
    ledger = Ledger("t")
    for index in range(4):
        _chat(ledger, answered=index < 3)
    for outcome in ("completed", "completed", "completed", "failed: model_error"):
        ledger.begin("run").outcome = outcome
    assert check_served(ledger, 0.75) == []
    ledger.begin("run").outcome = "failed: model_error"
    assert check_served(ledger, 0.75) == ["only 3 of 5 run operations completed (at least 75%)"]
    assert check_served(Ledger("t"), 0.75) == [
        "only 0 of 0 chat operations answered (at least 75%)",
        "only 0 of 0 run operations completed (at least 75%)",
    ]
