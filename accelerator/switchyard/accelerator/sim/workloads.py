"""Workloads: plain CSV files, the Azure LLM inference traces, Mooncake traces with prefix block hashes, synthetic
Poisson, bursty and agentic arrivals, rate scaling."""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from switchyard.accelerator.sim.block_hashes import BlockChain, BlockIds
from switchyard.accelerator.sim.mooncake import load_mooncake_trace
from switchyard.accelerator.sim.requests import Request

__all__ = [
    "GENERATED_BLOCK_TOKENS",
    "agentic_workload",
    "bursty_workload",
    "load_azure_trace",
    "load_csv_workload",
    "load_workload_file",
    "parse_workload",
    "poisson_workload",
    "repeat_workload",
    "scale_rate",
]


# Hash blocks of generated workloads and CSV prefixes: one KV page of the engine's default layout, so a prefix
# is reused to within a page, as vLLM's block hashes are.
GENERATED_BLOCK_TOKENS = 32


def _timestamp_s(text: str) -> float:
    # Azure traces carry 7 fractional digits, more than datetime parses: split them off.
    whole, _, frac = text.strip().partition(".")
    base = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").timestamp()
    return base + (float(f"0.{frac}") if frac else 0.0)


def load_azure_trace(path: str | Path, limit: int | None = None) -> list[Request]:
    """Requests of an Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens).

    Arrival times are seconds since the first request; zero-token outputs are served as one token.
    """
    out: list[Request] = []
    t0: float | None = None
    with Path(path).open(newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            if limit is not None and i >= limit:
                break
            t = _timestamp_s(row["TIMESTAMP"])
            t0 = t if t0 is None else t0
            out.append(
                Request(
                    request_id=i,
                    arrival_s=t - t0,
                    prompt_tokens=max(1, int(row["ContextTokens"])),
                    output_tokens=max(1, int(row["GeneratedTokens"])),
                )
            )
    out.sort(key=lambda r: (r.arrival_s, r.request_id))
    return out


# Plain CSV columns, with the names Vidur's request traces give the same quantities.
_CSV_COLUMNS = {
    "arrival_s": ("arrival_s", "arrived_at"),
    "input_tokens": ("input_tokens", "num_prefill_tokens"),
    "output_tokens": ("output_tokens", "num_decode_tokens"),
}
_CSV_OPTIONAL = ("session", "tenant", "prefix_id", "prefix_tokens", "priority")


def load_csv_workload(path: str | Path, limit: int | None = None) -> list[Request]:
    """Requests of a plain CSV file: `arrival_s, input_tokens, output_tokens` (seconds from any origin; Vidur's
    `arrived_at, num_prefill_tokens, num_decode_tokens` are read the same way), and optionally `session`, `tenant`,
    `prefix_id` with `prefix_tokens` (a leading span shared by the requests naming it: its full blocks get
    hash-chain ids, `Request.block_hashes`) and `priority`.

    Empty optional cells mean "none". Requests are numbered in file order and returned in arrival order.
    """
    out: list[Request] = []
    ids = BlockIds()
    with Path(path).open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = set(reader.fieldnames or ())
        columns = {}
        for key, names in _CSV_COLUMNS.items():
            found = next((n for n in names if n in header), None)
            if found is None:
                raise ValueError(
                    f"{path}: a workload CSV needs the column {' or '.join(names)}; it has {sorted(header)}"
                )
            columns[key] = found
        for i, row in enumerate(reader):
            if limit is not None and i >= limit:
                break
            line = i + 2
            try:
                extra = {k: row[k] for k in _CSV_OPTIONAL if row.get(k)}
                prefix_tokens = int(extra.get("prefix_tokens", 0))
                prompt_tokens = int(row[columns["input_tokens"]])
                if not 0 <= prefix_tokens <= prompt_tokens:
                    raise ValueError("prefix_tokens must lie between 0 and input_tokens")
                chain = BlockChain(ids, GENERATED_BLOCK_TOKENS)
                if "prefix_id" in extra:
                    chain.extend(("prefix", extra["prefix_id"]), prefix_tokens)
                req = Request(
                    request_id=i,
                    arrival_s=float(row[columns["arrival_s"]]),
                    prompt_tokens=prompt_tokens,
                    output_tokens=int(row[columns["output_tokens"]]),
                    session=extra.get("session"),
                    tenant=extra.get("tenant"),
                    block_hashes=tuple(chain.hashes),
                    hash_block_tokens=GENERATED_BLOCK_TOKENS,
                    priority=int(extra.get("priority", 1)),
                )
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path}, line {line}: {exc}") from exc
            if req.prompt_tokens < 1 or req.output_tokens < 1 or req.arrival_s < 0 or math.isnan(req.arrival_s):
                raise ValueError(f"{path}, line {line}: token counts must be >= 1 and arrival_s >= 0")
            out.append(req)
    out.sort(key=lambda r: (r.arrival_s, r.request_id))
    return out


def load_workload_file(path: str | Path) -> list[Request]:
    """A workload file: a Mooncake JSON-lines trace (see load_mooncake_trace), an Azure trace (its `TIMESTAMP`
    column) or a plain CSV (see load_csv_workload)."""
    with Path(path).open(newline="", encoding="utf-8") as fh:
        if fh.read(4096).lstrip().startswith("{"):
            return load_mooncake_trace(path)
        fh.seek(0)
        header = next(csv.reader(fh), [])
    return load_azure_trace(path) if "TIMESTAMP" in header else load_csv_workload(path)


def _length(rng: random.Random, mean: float, sigma: float = 0.8, cap: int = 32768) -> int:
    """Log-normal token count with the given mean (heavy-tailed, like production prompts)."""
    mu = math.log(mean) - sigma * sigma / 2
    return max(1, min(cap, round(rng.lognormvariate(mu, sigma))))


def poisson_workload(
    n: int, rate_per_s: float, prompt_mean: float = 1024, output_mean: float = 256, seed: int = 0
) -> list[Request]:
    """`n` requests with exponential inter-arrival times and log-normal lengths."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate_per_s)
        out.append(Request(i, t, _length(rng, prompt_mean), _length(rng, output_mean)))
    return out


def bursty_workload(
    n: int,
    rate_per_s: float,
    burst_factor: float = 8.0,
    burst_fraction: float = 0.1,
    mean_state_s: float = 30.0,
    prompt_mean: float = 1024,
    output_mean: float = 256,
    seed: int = 0,
) -> list[Request]:
    """Two-state Markov-modulated Poisson arrivals with mean rate `rate_per_s`.

    A share `burst_fraction` of the time runs at `burst_factor` times the quiet rate.
    """
    rng = random.Random(seed)
    quiet = rate_per_s / (1 - burst_fraction + burst_fraction * burst_factor)
    t = 0.0
    out: list[Request] = []
    bursting = False
    state_end = rng.expovariate(1 / (mean_state_s * (1 - burst_fraction)))
    while len(out) < n:
        rate = quiet * burst_factor if bursting else quiet
        nxt = t + rng.expovariate(rate)
        if nxt > state_end:
            t = state_end
            bursting = not bursting
            share = burst_fraction if bursting else 1 - burst_fraction
            state_end = t + rng.expovariate(1 / (mean_state_s * share))
            continue
        t = nxt
        out.append(Request(len(out), t, _length(rng, prompt_mean), _length(rng, output_mean)))
    return out


def agentic_workload(
    sessions: int,
    session_rate_per_s: float,
    agents: int = 4,
    system_prompt_tokens: int = 2048,
    turns_mean: float = 4.0,
    user_tokens_mean: float = 200,
    output_mean: float = 150,
    tool_pause_s_mean: float = 2.0,
    seconds_per_output_token: float = 0.03,
    seed: int = 0,
    block_tokens: int = GENERATED_BLOCK_TOKENS,
) -> list[Request]:
    """Multi-turn agent sessions: each session belongs to one of `agents` agents, whose system prompt is
    a prefix shared by all its sessions; every turn resends the whole conversation so far, so turn n's prompt is
    the system prompt, every earlier turn's message and answer, and its new message. `block_hashes` carry it:
    blocks of `block_tokens` tokens hashed as a chain, shared by the agent's sessions for the system prompt and by
    a session's later turns for its history.

    Open loop: turn k+1 arrives after turn k's expected generation time (output tokens x
    `seconds_per_output_token`) plus an exponential tool-call / user pause.
    """
    rng = random.Random(seed)
    out: list[Request] = []
    ids = BlockIds()
    t = 0.0
    for s in range(sessions):
        t += rng.expovariate(session_rate_per_s)
        agent = rng.randrange(agents)
        turns = max(1, round(rng.expovariate(1 / turns_mean)))
        chain = BlockChain(ids, block_tokens)
        chain.extend(("system", agent), system_prompt_tokens)
        at = t
        for turn in range(turns):
            chain.extend(("user", s, turn), _length(rng, user_tokens_mean))
            n_out = _length(rng, output_mean)
            out.append(
                Request(
                    0,
                    at,
                    chain.tokens,
                    n_out,
                    session=f"session-{s}",
                    tenant=f"tenant-{agent}",  # one agent per tenant
                    block_hashes=tuple(chain.hashes),
                    hash_block_tokens=block_tokens,
                )
            )
            chain.extend(("answer", s, turn), n_out)
            at += n_out * seconds_per_output_token + rng.expovariate(1 / tool_pause_s_mean)
    out.sort(key=lambda r: r.arrival_s)
    return [replace(r, request_id=i) for i, r in enumerate(out)]


def scale_rate(requests: Sequence[Request], factor: float) -> list[Request]:
    """The same requests arriving `factor` times faster (factor 2: twice the load)."""
    if factor <= 0:
        raise ValueError("rate factor must be positive")
    return [replace(r, arrival_s=r.arrival_s / factor) for r in requests]


def repeat_workload(requests: Sequence[Request], times: int) -> list[Request]:
    """The trace played `times` times back to back (same load, `times` as many requests)."""
    if not requests:
        return []
    span = max(r.arrival_s for r in requests) + 1.0
    n = len(requests)
    return [
        replace(r, request_id=k * n + r.request_id, arrival_s=k * span + r.arrival_s)
        for k in range(times)
        for r in requests
    ]


def parse_workload(spec: str) -> list[Request]:
    """A workload from a CLI spec: a file (a Mooncake JSON-lines trace, an Azure trace or a plain CSV, see
    load_workload_file), or
    `poisson:n=..,rate=..[,prompt=..,output=..,seed=..]`,
    `bursty:` with the same keys plus `burst=..` (factor), or
    `agentic:sessions=..,rate=..[,agents=..,system=..,seed=..]` (rate in sessions per second)."""
    kind, _, params = spec.partition(":")
    if kind not in ("poisson", "bursty", "agentic") or not params:
        return load_workload_file(spec)
    kv = dict(p.split("=", 1) for p in params.split(",") if p)
    if kind == "agentic":
        try:
            sessions, rate = int(kv["sessions"]), float(kv["rate"])
        except KeyError as exc:
            raise ValueError(f"workload spec {spec!r} needs sessions= and rate=") from exc
        return agentic_workload(
            sessions,
            rate,
            agents=int(kv.get("agents", 4)),
            system_prompt_tokens=int(kv.get("system", 2048)),
            seed=int(kv.get("seed", 0)),
        )
    try:
        n, rate = int(kv["n"]), float(kv["rate"])
    except KeyError as exc:
        raise ValueError(f"workload spec {spec!r} needs n= and rate=") from exc
    prompt, output, seed = float(kv.get("prompt", 1024)), float(kv.get("output", 256)), int(kv.get("seed", 0))
    if kind == "poisson":
        return poisson_workload(n, rate, prompt, output, seed)
    return bursty_workload(n, rate, float(kv.get("burst", 8.0)), prompt_mean=prompt, output_mean=output, seed=seed)
