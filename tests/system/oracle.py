"""The oracle: what must hold after the workload and the faults, each check returning its violations as text.

The checks compare what clients saw (the ledger) with what the installation recorded (PostgreSQL, Redis,
``switchyard billing reconcile``, process exits); none of them looks at how the product does it.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from tests.system.ledger import Attempt, Ledger

__all__ = [
    "SlotHolding",
    "UsageRow",
    "check_chat_billing",
    "check_exits",
    "check_members",
    "check_reconcile",
    "check_runs",
    "check_slots",
    "check_timeouts",
    "read_slots",
]

TIMEOUT_ERRORS = ("Timeout",)  # httpx.ReadTimeout, ConnectTimeout, ..., openai.APITimeoutError
SHOWN = 12  # violations listed per check


@dataclass(frozen=True)
class UsageRow:
    event_id: str
    run_id: str | None
    prompt_tokens: int
    completion_tokens: int
    chip_us: int


def _listed(title: str, items: list[str]) -> list[str]:
    if not items:
        return []
    more = f" (and {len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return [f"{title}: {len(items)}{more}\n      " + "\n      ".join(items[:SHOWN])]


# -- chat completions: one usage event per answer, none without one ---------------------------------------


def check_chat_billing(ledger: Ledger, usage: list[UsageRow]) -> list[str]:
    """Every answered chat completion has exactly one usage event, of the answer's chip-us. A request without an
    answer has none, unless it is a partial-compute cancellation (fewer completion tokens than it asked for) or
    its API process was SIGKILLed while it was open
    (the usage commits before the answer's end is sent: a kill in between bills an answer the client never got
    whole, which no outbox can avoid).

    Completion ids are the server's: an attempt that received no bytes has none in the ledger. Usage events of
    such unseen completions are matched by counting: apart from partial ones, there may be at most as many as
    attempts that died with their API process before any byte came back.
    """
    chat_attempts = [a for a in ledger.attempts if a.path.endswith("/chat/completions")]
    seen = {a.completion_id: a for a in chat_attempts if a.completion_id is not None}
    answered = {
        r.answered.completion_id: r
        for r in ledger.requests
        if r.kind == "chat" and r.answered is not None and r.answered.completion_id is not None
    }
    chat_usage = [u for u in usage if u.run_id is None]
    events = Counter(u.event_id for u in chat_usage)
    by_id = {u.event_id: u for u in chat_usage}
    asked: dict[int, set[int]] = {}  # prompt tokens -> max_tokens asked (each workload prompt asks one size)
    for completion_id, request in answered.items():
        if completion_id in by_id:
            asked.setdefault(by_id[completion_id].prompt_tokens, set()).add(request.detail["max_tokens"])
    unbilled, doubled, wrong_amount, billed_without_answer, unseen = [], [], [], [], []
    for completion_id, request in answered.items():
        count = events.get(completion_id, 0)
        if count == 0:
            unbilled.append(f"{completion_id} ({_describe(request.answered)})")
        elif count > 1:
            doubled.append(f"{completion_id}: {count} usage events")
        elif request.chip_us is not None and by_id[completion_id].chip_us != request.chip_us:
            wrong_amount.append(
                f"{completion_id}: answer said {request.chip_us} chip-us, usage event {by_id[completion_id].chip_us}"
            )
    for event_id, row in by_id.items():
        if event_id in answered:
            continue
        attempt = seen.get(event_id)
        if attempt is not None and attempt.request is not None:
            max_tokens: int | None = attempt.request.detail["max_tokens"]
        else:
            max_tokens = min(asked[row.prompt_tokens]) if row.prompt_tokens in asked else None
        partial = max_tokens is not None and row.completion_tokens < max_tokens
        if partial or (attempt is not None and attempt.killed):
            continue
        described = f"{event_id}: {row.completion_tokens} of {max_tokens} tokens, {row.chip_us} chip-us"
        if attempt is not None:
            billed_without_answer.append(f"{described}; client saw {_describe(attempt)}")
        else:
            unseen.append(described)
    crashed_unseen = sum(1 for a in chat_attempts if a.killed and a.completion_id is None)
    return (
        _listed("answered chat completions with no usage event", unbilled)
        + _listed("answered chat completions billed more than once", doubled)
        + _listed("usage events whose chip-us differ from the answer's", wrong_amount)
        + _listed(
            "usage events for requests that got no answer (and are no partial-compute cancellation)",
            billed_without_answer,
        )
        + _listed(
            "usage events of completions no client saw a byte of, beyond the "
            f"{crashed_unseen} requests that died with their API process before answering",
            unseen if len(unseen) > crashed_unseen else [],
        )
    )


def _describe(attempt: Attempt | None) -> str:
    if attempt is None:
        return "?"
    state = "killed with its API process" if attempt.killed else (attempt.error or f"HTTP {attempt.status}")
    return (
        f"{attempt.id} on :{attempt.port}, {state}, {attempt.bytes} bytes, [DONE]={attempt.done}, "
        f"{attempt.duration_s:.1f} s"
    )


# -- runs: terminal, with a stated reason when failed; each billed model step once -------------------------


def check_runs(runs: list[tuple[str, str, dict[str, Any], int]], usage: list[UsageRow]) -> list[str]:
    """``runs``: (id, status, state JSON, chip_us) of every run of the test tenant."""
    not_terminal, failed_silently, billing = [], [], []
    by_run: dict[str, list[UsageRow]] = {}
    for row in usage:
        if row.run_id is not None:
            by_run.setdefault(row.run_id, []).append(row)
    for run_id, status, state, chip_us in runs:
        if status == "failed":
            error = (state or {}).get("last_error") or {}
            if not (error.get("code") and error.get("message")):
                failed_silently.append(f"{run_id}: last_error={error!r}")
        elif status in ("incomplete", "cancelled", "expired"):
            details = (state or {}).get("incomplete_details") or (state or {}).get("last_error")
            failed_silently.append(f"{run_id}: {status} ({details})")
        elif status != "completed":
            action = (state or {}).get("required_action")
            not_terminal.append(f"{run_id}: {status}" + (" (waiting for the client)" if action else ""))
        steps = (state or {}).get("steps") or []
        billed_steps = sorted(s["id"] for s in steps if s.get("type") == "model_call" and s.get("usage") is not None)
        events = sorted(u.event_id for u in by_run.get(run_id, []))
        if events != billed_steps:
            billing.append(f"{run_id}: billed model steps {billed_steps}, usage events {events}")
        elif sum(u.chip_us for u in by_run.get(run_id, [])) != chip_us:
            billing.append(f"{run_id}: run chip_us {chip_us} != its usage events' sum")
    counts = Counter(status for _id, status, _state, _chip in runs)
    failures = []
    if not runs:
        failures.append("no agent run was created at all")
    return (
        failures
        + _listed(f"runs not terminal (statuses {dict(counts)})", not_terminal)
        + _listed("runs neither completed nor failed with a stated last_error", failed_silently)
        + _listed("runs whose model steps and usage events disagree", billing)
    )


# -- timeouts ----------------------------------------------------------------------------------------------


def check_timeouts(ledger: Ledger, timeout_s: float) -> list[str]:
    """No attempt outlived the client's timeout: none timed out, none took longer, none is still open."""
    late = []
    for attempt in ledger.attempts:
        if attempt.ended is None:
            late.append(f"still open: {_describe(attempt)} {attempt.method} {attempt.path}")
        elif attempt.duration_s > timeout_s or any(t in (attempt.error or "") for t in TIMEOUT_ERRORS):
            late.append(f"{_describe(attempt)} {attempt.method} {attempt.path}")
    return _listed(f"requests that outlived the client timeout of {timeout_s:.0f} s", late)


# -- concurrency slots -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotHolding:
    key: str
    shape: str  # "counter" or "holders"
    count: int  # live slots
    holders: tuple[tuple[str, float], ...] = ()  # (holder, expiry as unix seconds) of live slots


def read_slots(client: Any, prefix: str = "sy:cc:") -> list[SlotHolding]:
    """Every concurrency key in Redis with its live slots: a counter's value, or a sorted set's members whose
    expiry score (unix seconds or milliseconds) is still in the future by Redis's clock."""
    seconds, micros = client.time()
    now = seconds + micros / 1e6
    out = []
    for raw in client.scan_iter(match=prefix + "*", count=500):
        key = raw.decode()
        kind = client.type(raw).decode()
        if kind == "string":
            out.append(SlotHolding(key, "counter", int(client.get(raw) or 0)))
        elif kind == "zset":
            live = []
            for member, score in client.zrange(raw, 0, -1, withscores=True):
                expiry = score / 1000 if score > 1e11 else score
                if expiry > now:
                    live.append((member.decode(), expiry))
            out.append(SlotHolding(key, "holders", len(live), tuple(live)))
        elif kind in ("set", "hash", "list"):
            size = {"set": client.scard, "hash": client.hlen, "list": client.llen}[kind](raw)
            out.append(SlotHolding(key, kind, int(size)))
    return out


def check_slots(
    slots: list[SlotHolding], crashed: dict[str, float], unseen_crashes: list[float], ttl_s: float
) -> list[str]:
    """No slot left held, except those of work that died with a SIGKILLed process, which must expire by
    themselves within ``ttl_s`` of the kill (not be renewed by the tenant's other traffic). ``crashed``:
    identifiers (completion ids, run and step ids) of work that died with a process -> unix time of the kill;
    ``unseen_crashes``: kill times of chat requests that died before their completion id reached the client
    (their holders are matched by counting)."""
    held, unmatched = [], []
    for slot in slots:
        if slot.shape != "holders":
            if slot.count != 0:
                held.append(f"{slot.key}: {slot.shape} of {slot.count}")
            continue
        for holder, expiry in slot.holders:
            killed_at = next((t for ident, t in crashed.items() if ident in holder), None)
            if killed_at is None:
                unmatched.append((holder, expiry, slot.key))
            elif expiry > killed_at + ttl_s + 2:
                held.append(f"{slot.key}: {holder} died at a kill -9 but its slot was renewed since")
    spare = sorted(unseen_crashes)
    for holder, expiry, key in sorted(unmatched, key=lambda item: item[1]):
        if holder.startswith("chatcmpl-") and spare and expiry <= spare[-1] + ttl_s + 2:
            spare.pop()
            continue
        held.append(f"{key}: {holder} (expires in {expiry - _now():.0f} s)")
    return _listed("concurrency slots left held", held)


def _now() -> float:
    return time.time()


# -- exits, reconciliation, keys and members ---------------------------------------------------------------


def check_exits(exits: dict[str, float | None], bound_s: float) -> list[str]:
    slow = [
        f"{name}: {'did not exit' if took is None else f'{took:.1f} s'}"
        for name, took in exits.items()
        if took is None or took > bound_s
    ]
    return _listed(f"processes that did not exit within {bound_s:.0f} s of SIGTERM", slow)


_BUSY_LINE = re.compile(r"^\s+(\S+): attributed ([\d,]+) chip-us, fleet busy (.+)$", re.MULTILINE)


def check_reconcile(period: str, returncode: int, output: str) -> list[str]:
    failures = []
    if returncode != 0:
        failures.append(f"`switchyard billing reconcile --period {period}` exited {returncode}:\n{output}")
    lines = _BUSY_LINE.findall(output)
    if not lines:
        failures.append(f"reconcile --period {period} shows no chip-us check:\n{output}")
    for instance, _attributed, busy in lines:
        if not re.match(r"^[\d,]+", busy):
            failures.append(
                f"reconcile --period {period}: {instance} fleet busy {busy} (the chip-us check was not made)"
            )
    return failures


def check_members(
    expected: dict[str, str | None], unsure: set[str], found: dict[str, list[str]], revoked_answers: list[int]
) -> list[str]:
    """``found``: email -> roles of the members listed at the end; ``revoked_answers``: the status codes of a
    request made with each key whose revocation was answered."""
    wrong = []
    for email, role in expected.items():
        roles = found.get(email, [])
        if len(roles) > 1:
            wrong.append(f"{email}: {len(roles)} members (a retried POST applied twice)")
        elif email in unsure:
            continue
        elif role is None and roles:
            wrong.append(f"{email}: deleted, still listed as {roles}")
        elif role is not None and roles != [role]:
            wrong.append(f"{email}: expected role {role}, found {roles}")
    still_valid = [str(code) for code in revoked_answers if code != 401]
    return _listed("members whose final state contradicts the answered operations", wrong) + _listed(
        "revoked keys that still authenticate (status of a request made with them)", still_valid
    )


# -- service through the faults ----------------------------------------------------------------------------


def check_served(ledger: Ledger, at_least: float) -> list[str]:
    """Faults may cost some requests their answer, but the installation serves through them: at least
    ``at_least`` of the chat completions are answered and of the runs completed (on a quiet machine every run
    completes and ~99 % of completions are answered; the 503s are the Redis outage's)."""
    failures = []
    for kind, done in (("chat", "answered"), ("run", "completed")):
        ended = [r for r in ledger.requests if r.kind == kind]
        served = sum(1 for r in ended if r.outcome.split(":")[0] == done)
        if not ended or served < at_least * len(ended):
            failures.append(f"only {served} of {len(ended)} {kind} operations {done} (at least {at_least:.0%})")
    return failures
